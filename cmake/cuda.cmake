# The CUDA backend plugin (engine/cuda/, kernels/cuda/), built when nvcc is found.
