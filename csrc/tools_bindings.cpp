// Python bindings of the tools' core: op tracking, the stats page, memory
// history and snapshots in PyTorch's snapshot format (torch.cuda._memory_viz
// reads it). Stacks are PyTorch's own CapturedTraceback, symbolised by it.
#include "neuron_core.h"
#include "tools_core.h"

#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Export.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/csrc/utils/pybind.h>

// From torch/csrc/profiler/python/combined_traceback.h (libtorch_python), declared
// here because that header needs nlohmann/json, which torch does not install.
namespace torch {
TORCH_API std::vector<pybind11::object> py_symbolize(std::vector<CapturedTraceback*>& to_symbolize);
TORCH_PYTHON_API void installCapturedTracebackPython();
}  // namespace torch

namespace torch_neuronx {
namespace {

std::shared_ptr<c10::GatheredContext> gather_python() {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/false, /*cpp=*/false);
}
std::shared_ptr<c10::GatheredContext> gather_all() {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/true, /*cpp=*/true);
}

void record_history(bool enabled, bool record_trace, int64_t max_entries, const std::string& stacks) {
  ContextFn fn = nullptr;
  if (enabled && stacks != "none") {
    torch::installCapturedTracebackPython();
    fn = stacks == "all" ? &gather_all : &gather_python;
  }
  record_memory_history(enabled, record_trace, static_cast<size_t>(std::max<int64_t>(max_entries, 1)), fn);
}

// Collects the tracebacks of a snapshot and symbolises them in one batch.
struct FrameTable {
  std::vector<torch::CapturedTraceback*> tracebacks;
  std::vector<py::dict> pending;  // dicts whose "frames" the batch fills

  void add(py::dict& d, const std::shared_ptr<c10::GatheredContext>& ctx) {
    auto* tb = dynamic_cast<torch::CapturedTraceback*>(ctx.get());
    if (tb == nullptr) {
      d["frames"] = py::list();
      return;
    }
    tracebacks.push_back(tb);
    pending.push_back(d);
  }
  void resolve() {
    if (tracebacks.empty()) return;
    std::vector<py::object> frames = torch::py_symbolize(tracebacks);
    for (size_t i = 0; i < frames.size(); ++i) pending[i]["frames"] = frames[i];
  }
};

py::dict snapshot() {
  AllocatorSnapshot snap = allocator_snapshot();
  FrameTable frames;
  py::list segments;
  for (const SnapshotSegment& seg : snap.segments) {
    py::dict s;
    int64_t allocated = 0, requested = 0;
    py::list blocks;
    for (const SnapshotBlock& b : seg.blocks) {
      py::dict bd;
      bd["address"] = b.address;
      bd["size"] = b.size;
      bd["requested_size"] = b.allocated ? b.requested : b.size;
      bd["state"] = b.allocated ? "active_allocated" : "inactive";
      frames.add(bd, b.context);
      if (b.allocated) {
        allocated += b.size;
        requested += b.requested;
      }
      blocks.append(bd);
    }
    s["device"] = seg.device;
    s["address"] = seg.address;
    s["total_size"] = seg.total_size;
    s["allocated_size"] = allocated;
    s["active_size"] = allocated;
    s["requested_size"] = requested;
    s["stream"] = 0;
    s["segment_type"] = seg.small_pool ? "small" : "large";
    s["segment_pool_id"] = py::make_tuple(0, 0);
    s["is_expandable"] = false;
    s["host_kernel"] = seg.host_kernel;
    s["blocks"] = blocks;
    frames.add(s, seg.context);
    segments.append(s);
  }
  py::list traces;
  for (const auto& device_trace : snap.traces) {
    py::list entries;
    for (const SnapshotTrace& e : device_trace) {
      py::dict d;
      d["action"] = e.action;
      d["addr"] = e.address;
      d["size"] = e.size;
      d["stream"] = 0;
      d["time_us"] = e.time_us;
      frames.add(d, e.context);
      entries.append(d);
    }
    traces.append(entries);
  }
  frames.resolve();
  py::dict out;
  out["segments"] = segments;
  out["device_traces"] = traces;
  out["recording"] = snap.recording;
  return out;
}

// _stats_add(device, field, value): every compiled-graph call counts itself here (neuron-top's
// graph counter). A raw METH_FASTCALL function: pybind11's dispatcher is ~100 cache lines of code
// that a compiled decode step otherwise fetches again every call.
PyObject* stats_add_fast(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  TORCH_CHECK_TYPE(nargs == 3, "_stats_add(device, field, value) takes 3 arguments, got ", nargs);
  long long v[3];
  for (int i = 0; i < 3; ++i) {
    v[i] = PyLong_AsLongLong(args[i]);
    if (v[i] == -1 && PyErr_Occurred()) throw python_error();
  }
  TORCH_CHECK(v[0] >= 0 && v[0] < int64_t(kStatsMaxDevices) && v[1] >= 0 && v[1] < kNumFields,
              "_stats_add: device must be a core in [0, ", kStatsMaxDevices, ") and field a stats-page field in [0, ",
              int(kNumFields), ") (tools/api/registry.py FIELD_INDEX); got device=", v[0], ", field=", v[1],
              ": stats field out of range");
  stats_add(static_cast<c10::DeviceIndex>(v[0]), static_cast<StatsField>(v[1]), v[2]);
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

PyMethodDef stats_add_def = {
    "_stats_add", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&stats_add_fast)), METH_FASTCALL,
    "Add `value` to stats-page field `field` of core `device`: (device, field, value)."};

}  // namespace

void bind_tools(py::module& m) {
  m.def("_configure_stats_page", &configure_stats_page, "Where this process's stats page goes, and its metadata.");
  m.def("_stats_page_path", &stats_page_path);
  m.add_object("_stats_add", py::reinterpret_steal<py::object>(PyCFunction_New(&stats_add_def, nullptr)));
  m.def("_op_counts", [] {
    std::vector<std::pair<std::string, int64_t>> out;
    for (auto& c : op_counts()) out.emplace_back(std::move(c.name), c.count);
    return out;
  });
  m.def("_clear_op_tracking", &clear_op_tracking);
  m.def("_measure_op_scope_ns", &measure_op_scope_ns);
  m.def("_record_memory_history", &record_history);
  m.def("_memory_snapshot", &snapshot);
  m.def("_set_allocator_cache_limit", &set_allocator_cache_limit);
  m.def("_allocator_cache_limit", &allocator_cache_limit);
  m.def("_set_allocator_no_caching", &set_allocator_no_caching);
  m.def("_allocator_cached_bytes", &allocator_cached_bytes);
  m.def("_allocator_phantom", &allocator_phantom);
}

}  // namespace torch_neuronx
