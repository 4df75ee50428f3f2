# Accelerator backends, each a shared object the engine opens at run time (dlopen), so that
# the daemon runs on hosts without XRT or CUDA.
