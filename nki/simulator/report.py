"""What one simulated run reports: estimated time per engine, memory high-water marks."""
from __future__ import annotations

from dataclasses import dataclass, field

from .cost import COMPUTE_ENGINES, ENGINES, intersection_length, union_length


@dataclass
class RunReport:
    """Cost-model estimate and resource usage of one simulated kernel launch.

    Times are estimates in nanoseconds for ``target``; ``engine_busy_ns`` is the
    time each engine spends executing (for ``dma``: the union of transfer windows,
    including the fixed latency), ``total_ns`` the end of the last timeline.
    """

    kernel: str
    target: str
    grid: tuple
    total_ns: float
    engine_busy_ns: dict
    engine_instructions: dict
    dma_queue_busy_ns: float
    dma_bytes: int
    dma_compute_overlap_ns: float
    flops: int
    by_instruction: dict            # (engine, op) -> (count, ns)
    sbuf_peak_bytes_per_partition: int
    sbuf_capacity_bytes_per_partition: int
    psum_peak_banks: int
    psum_banks: int
    instructions: int
    wall_s: float = 0.0
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_run(cls, run, wall_s: float) -> "RunReport":
        c = run.cost
        busy = {e: (c.busy[e] if e != "dma" else union_length(c.intervals["dma"])) for e in ENGINES}
        compute_iv = [iv for e in COMPUTE_ENGINES for iv in c.intervals[e]]
        return cls(
            kernel=run.kernel_name, target=run.target.name, grid=run.grid, total_ns=c.end,
            engine_busy_ns=busy, engine_instructions=dict(c.count),
            dma_queue_busy_ns=c.queue_busy, dma_bytes=c.dma_bytes,
            dma_compute_overlap_ns=intersection_length(c.intervals["dma"], compute_iv),
            flops=c.flops, by_instruction={k: tuple(v) for k, v in c.by_op.items()},
            sbuf_peak_bytes_per_partition=run.sbuf.peak,
            sbuf_capacity_bytes_per_partition=run.sbuf.cap,
            psum_peak_banks=run.psum.peak, psum_banks=run.psum.nbanks,
            instructions=sum(c.count.values()), wall_s=wall_s)

    @property
    def total_us(self) -> float:
        return self.total_ns / 1e3

    @property
    def tflops(self) -> float:
        return self.flops / self.total_ns / 1e3 if self.total_ns else 0.0

    @property
    def instructions_per_second(self) -> float:
        return self.instructions / self.wall_s if self.wall_s else 0.0

    def utilization(self, engine: str) -> float:
        return self.engine_busy_ns[engine] / self.total_ns if self.total_ns else 0.0

    def bottleneck(self) -> str:
        return max(ENGINES, key=lambda e: self.engine_busy_ns[e])

    def summary(self, top: int = 8) -> str:
        lines = [f"NKI simulated run: {self.kernel} on {self.target} grid={self.grid}",
                 f"  estimated time   {self.total_us:10.2f} us   ({self.instructions} instructions, "
                 f"simulated in {self.wall_s:.3f} s)"]
        for e in ENGINES:
            lines.append(f"  {e:8s} busy  {self.engine_busy_ns[e] / 1e3:10.2f} us  "
                         f"{100 * self.utilization(e):5.1f}%  {self.engine_instructions[e]:6d} instr")
        lines.append(f"  dma/compute overlap {self.dma_compute_overlap_ns / 1e3:.2f} us, "
                     f"dma bytes {self.dma_bytes}")
        if self.flops:
            lines.append(f"  matmul {self.flops / 1e9:.3f} GFLOP -> {self.tflops:.1f} TFLOPS")
        lines.append(f"  SBUF peak {self.sbuf_peak_bytes_per_partition} / "
                     f"{self.sbuf_capacity_bytes_per_partition} bytes per partition; "
                     f"PSUM peak {self.psum_peak_banks} / {self.psum_banks} banks")
        ranked = sorted(self.by_instruction.items(), key=lambda kv: -kv[1][1])[:top]
        lines.append("  where time goes (engine, instruction, count, us):")
        for (eng, op), (n, ns) in ranked:
            lines.append(f"    {eng:8s} {op:24s} {n:6d} {ns / 1e3:10.2f}")
        return "\n".join(lines)

    __str__ = summary
