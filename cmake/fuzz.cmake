# libFuzzer targets (tests/fuzz/), built when the compiler is clang.
