/*
 * sample_lnexp.h: ln and 1 - e^-x for the sampler (sample_profile.c), without libm.
 * Plain static, not inline: sample_profile.c alone includes it, and its code
 * stays what it was when these lived there.
 */
#ifndef HEAPLINE_LNEXP_H
#define HEAPLINE_LNEXP_H

#include <stdint.h>

/* The sampler's two functions of libm's, so that the shim does not load
 * libm into programs that have no use for it (start-up: docs/performance.md).
 * Both are within a few units in the last place of libm's over the ranges
 * used here. */

/* ln x, x > 0: x = m 2^e with m in [sqrt(1/2), sqrt(2)), and
 * ln m = 2 atanh(s) = 2 (s + s^3/3 + ... + s^11/11), s = (m - 1) / (m + 1),
 * |s| < 0.172: within 1e-10 of ln x, far closer than a sampling interval
 * needs (a gap is a random draw; a weight, in sample_profile.c, is used to 2^-16). */
static double ln(double x)
{
    static const double inv_odd[] = {1.0 / 11, 1.0 / 9, 1.0 / 7, 1.0 / 5, 1.0 / 3, 1.0};
    union { double d; uint64_t u; } v = {x};
    int e = (int)((v.u >> 52) & 0x7ff) - 1023;
    v.u = (v.u & 0x000fffffffffffffull) | 0x3ff0000000000000ull; /* m in [1, 2) */
    if (v.d > 1.4142135623730951)
        v.d *= 0.5, e++;
    double s = (v.d - 1) / (v.d + 1), s2 = s * s, sum = 0;
    for (int k = 0; k < 6; k++)
        sum = sum * s2 + inv_odd[k];
    return 2 * s * sum + e * 0.6931471805599453;
}

/* 1 - e^-x, x >= 0, without the loss of precision near 0. */
static double one_minus_exp_neg(double x)
{
    /* 1/k! for k = 0 .. 17 */
    static const double inv_fact[] = {
        1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040, 1.0 / 40320, 1.0 / 362880,
        1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600, 1.0 / 6227020800.0, 1.0 / 87178291200.0,
        1.0 / 1307674368000.0, 1.0 / 20922789888000.0, 1.0 / 355687428096000.0};
    if (x < 0.5) { /* x - x^2/2! + ... - x^12/12!, by Horner: within 1e-12;
                    * to x^6/6! below 1/64, which a block under 8 KiB is at
                    * the default interval */
        double sum = 0;
        for (int k = x < 1.0 / 64 ? 6 : 12; k >= 1; k--)
            sum = sum * -x + inv_fact[k];
        return sum * x;
    }
    if (x > 700)
        return 1;
    int k = (int)(x / 0.6931471805599453 + 0.5); /* e^-x = 2^-k e^r, |r| <= ln2/2 */
    double r = k * 0.6931471805599453 - x, e = 0;
    for (int i = 17; i >= 0; i--)
        e = e * r + inv_fact[i];
    union { double d; uint64_t u; } scale = {.u = (uint64_t)(1023 - k) << 52};
    return 1 - e * scale.d;
}

#endif
