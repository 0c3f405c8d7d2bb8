// FLASHCHECK_HOST_FMA_CLONES: the host model's hot loops spell every FMA the kernels fuse as std::fma, which is
// correctly rounded on any machine; without the FMA instruction in the compile target each one is a libm call. On
// x86-64 the functions so marked are compiled twice, for processors with FMA and for the baseline, and the loader
// picks one: the same bits either way (std::fma rounds once in both, and -ffp-contract=off forbids any other fusing),
// about twice the speed of the model's inner loops where FMA exists.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#define FLASHCHECK_HOST_FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define FLASHCHECK_HOST_FMA_CLONES
#endif
