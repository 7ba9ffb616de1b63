from .rmsnorm import rmsnorm_fwd

__all__ = ["rmsnorm_fwd"]
