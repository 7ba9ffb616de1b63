"""The four canonical NKI kernels, written in the current dialect (our own implementations):
tensor_add, matmul (the tutorial progression), rmsnorm (ragged tails), attention
(fused causal attention with online softmax)."""
