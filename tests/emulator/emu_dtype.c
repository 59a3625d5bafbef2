/* emu_dtype.c -- NCCL datatypes on the CPU: sizes, small-float conversion, reduction kernels. */
#include "emu.h"

#include <math.h>
#include <string.h>

/* Size in bytes of one element of dt, or 0 if dt is not a valid datatype. */
size_t emu_dtype_size(ncclDataType_t dt)
{
    switch (dt) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
        return 1;
    case ncclFloat16:
    case ncclBfloat16:
        return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
        return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
        return 8;
    default:
        return 0;
    }
}

/* ---- small floating-point formats (half, bfloat16, fp8) ---- */

struct minifmt {
    int eb, mb; /* exponent and mantissa bits */
    int fn;     /* 1: no infinity, all-ones pattern is NaN (e4m3fn) */
};

static const struct minifmt fmt_half = {5, 10, 0};
static const struct minifmt fmt_bf16 = {8, 7, 0};
static const struct minifmt fmt_e4m3 = {4, 3, 1};
static const struct minifmt fmt_e5m2 = {5, 2, 0};

static double mini_max(const struct minifmt *f)
{
    int bias = (1 << (f->eb - 1)) - 1;
    int emax = (1 << f->eb) - 1;
    if (f->fn)
        return (2.0 - ldexp(1.0, 1 - f->mb)) * ldexp(1.0, emax - bias);
    return (2.0 - ldexp(1.0, -f->mb)) * ldexp(1.0, emax - 1 - bias);
}

static double mini_decode(unsigned bits, const struct minifmt *f)
{
    int bias = (1 << (f->eb - 1)) - 1;
    unsigned emax = (1u << f->eb) - 1;
    unsigned sign = (bits >> (f->eb + f->mb)) & 1;
    unsigned e = (bits >> f->mb) & emax;
    unsigned m = bits & ((1u << f->mb) - 1);
    double v;
    if (f->fn && e == emax && m == (1u << f->mb) - 1)
        v = NAN;
    else if (!f->fn && e == emax)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp((double)m, 1 - bias - f->mb);
    else
        v = ldexp((double)(m | (1u << f->mb)), (int)e - bias - f->mb);
    return sign ? -v : v;
}

/* Round v to the nearest representable value (ties to even) and encode it. */
static unsigned mini_encode(double v, const struct minifmt *f)
{
    int bias = (1 << (f->eb - 1)) - 1;
    unsigned emax = (1u << f->eb) - 1;
    unsigned sign = signbit(v) ? 1u : 0u;
    unsigned sbit = sign << (f->eb + f->mb);
    double a = fabs(v);
    if (isnan(v)) {
        if (f->fn)
            return sbit | (emax << f->mb) | ((1u << f->mb) - 1);
        return sbit | (emax << f->mb) | (1u << (f->mb - 1));
    }
    double maxf = mini_max(f);
    if (!isinf(a)) {
        int e2;
        frexp(a, &e2);             /* a = frac * 2^e2, frac in [0.5,1) */
        int qexp = e2 - 1 - f->mb; /* quantum exponent for normal a */
        if (e2 - 1 < 1 - bias)
            qexp = 1 - bias - f->mb;
        a = ldexp(nearbyint(ldexp(a, -qexp)), qexp);
    }
    if (a > maxf) {
        if (f->fn)
            a = maxf; /* saturate: e4m3fn has no infinity */
        else
            return sbit | (emax << f->mb);
    }
    if (a == 0)
        return sbit;
    int e2;
    frexp(a, &e2);
    int e = e2 - 1 + bias;
    if (e <= 0) { /* subnormal */
        unsigned m = (unsigned)ldexp(a, bias - 1 + f->mb);
        return sbit | m;
    }
    unsigned m = (unsigned)(ldexp(a, -(e2 - 1) + f->mb)) - (1u << f->mb);
    return sbit | ((unsigned)e << f->mb) | m;
}

static const struct minifmt *mini_fmt(ncclDataType_t dt)
{
    switch (dt) {
    case ncclFloat16:
        return &fmt_half;
    case ncclBfloat16:
        return &fmt_bf16;
    case ncclFloat8e4m3:
        return &fmt_e4m3;
    case ncclFloat8e5m2:
        return &fmt_e5m2;
    default:
        return NULL;
    }
}

static double mini_load(const void *p, size_t i, const struct minifmt *f)
{
    if (f->eb + f->mb + 1 == 8)
        return mini_decode(((const uint8_t *)p)[i], f);
    uint16_t b;
    memcpy(&b, (const char *)p + 2 * i, 2);
    return mini_decode(b, f);
}

static void mini_store(void *p, size_t i, double v, const struct minifmt *f)
{
    unsigned bits = mini_encode(v, f);
    if (f->eb + f->mb + 1 == 8) {
        ((uint8_t *)p)[i] = (uint8_t)bits;
    } else {
        uint16_t b = (uint16_t)bits;
        memcpy((char *)p + 2 * i, &b, 2);
    }
}

static double apply_d(double a, double b, int op)
{
    switch (op) {
    case ncclProd:
        return a * b;
    case ncclMax:
        return (a > b || isnan(a)) ? a : b;
    case ncclMin:
        return (a < b || isnan(a)) ? a : b;
    default:
        return a + b;
    }
}

/* ---- native types: integer arithmetic wraps (done in the unsigned type) ---- */

#define NATIVE_REDUCE(NAME, T, UT)                                                                 \
    static void reduce_##NAME(T *a, const T *b, size_t n, int op)                                  \
    {                                                                                              \
        size_t i;                                                                                  \
        switch (op) {                                                                              \
        case ncclProd:                                                                             \
            for (i = 0; i < n; i++)                                                                \
                a[i] = (T)((UT)a[i] * (UT)b[i]);                                                   \
            break;                                                                                 \
        case ncclMax:                                                                              \
            for (i = 0; i < n; i++)                                                                \
                if (b[i] > a[i])                                                                   \
                    a[i] = b[i];                                                                   \
            break;                                                                                 \
        case ncclMin:                                                                              \
            for (i = 0; i < n; i++)                                                                \
                if (b[i] < a[i])                                                                   \
                    a[i] = b[i];                                                                   \
            break;                                                                                 \
        default:                                                                                   \
            for (i = 0; i < n; i++)                                                                \
                a[i] = (T)((UT)a[i] + (UT)b[i]);                                                   \
        }                                                                                          \
    }

NATIVE_REDUCE(i8, int8_t, uint8_t)
NATIVE_REDUCE(u8, uint8_t, uint8_t)
NATIVE_REDUCE(i32, int32_t, uint32_t)
NATIVE_REDUCE(u32, uint32_t, uint32_t)
NATIVE_REDUCE(i64, int64_t, uint64_t)
NATIVE_REDUCE(u64, uint64_t, uint64_t)
NATIVE_REDUCE(f32, float, float)
NATIVE_REDUCE(f64, double, double)

/* acc[i] = acc[i] OP in[i] for n elements of dt; op is ncclSum/Prod/Max/Min. */
void emu_reduce(void *acc, const void *in, size_t n, ncclDataType_t dt, int op)
{
    switch (dt) {
    case ncclInt8:
        reduce_i8(acc, in, n, op);
        return;
    case ncclUint8:
        reduce_u8(acc, in, n, op);
        return;
    case ncclInt32:
        reduce_i32(acc, in, n, op);
        return;
    case ncclUint32:
        reduce_u32(acc, in, n, op);
        return;
    case ncclInt64:
        reduce_i64(acc, in, n, op);
        return;
    case ncclUint64:
        reduce_u64(acc, in, n, op);
        return;
    case ncclFloat32:
        reduce_f32(acc, in, n, op);
        return;
    case ncclFloat64:
        reduce_f64(acc, in, n, op);
        return;
    default:
        break;
    }
    const struct minifmt *f = mini_fmt(dt);
    if (!f)
        return;
    for (size_t i = 0; i < n; i++)
        mini_store(acc, i, apply_d(mini_load(acc, i, f), mini_load(in, i, f), op), f);
}

#define NATIVE_MAP(T, EXPR)                                                                        \
    do {                                                                                           \
        T *p = buf;                                                                                \
        for (size_t i = 0; i < n; i++)                                                             \
            p[i] = (T)(EXPR);                                                                      \
    } while (0)

/* buf[i] *= scalar (PreMulSum); integer types multiply by the integer scalar. */
void emu_scale(void *buf, size_t n, ncclDataType_t dt, double scalar)
{
    int64_t is = (int64_t)scalar;
    switch (dt) {
    case ncclInt8:
        NATIVE_MAP(int8_t, (uint8_t)p[i] * (uint8_t)is);
        return;
    case ncclUint8:
        NATIVE_MAP(uint8_t, p[i] * (uint8_t)is);
        return;
    case ncclInt32:
        NATIVE_MAP(int32_t, (uint32_t)p[i] * (uint32_t)is);
        return;
    case ncclUint32:
        NATIVE_MAP(uint32_t, p[i] * (uint32_t)is);
        return;
    case ncclInt64:
        NATIVE_MAP(int64_t, (uint64_t)p[i] * (uint64_t)is);
        return;
    case ncclUint64:
        NATIVE_MAP(uint64_t, p[i] * (uint64_t)is);
        return;
    case ncclFloat32:
        NATIVE_MAP(float, p[i] * (float)scalar);
        return;
    case ncclFloat64:
        NATIVE_MAP(double, p[i] * scalar);
        return;
    default:
        break;
    }
    const struct minifmt *f = mini_fmt(dt);
    if (!f)
        return;
    for (size_t i = 0; i < n; i++)
        mini_store(buf, i, mini_load(buf, i, f) * scalar, f);
}

/* buf[i] /= divisor (the final step of ncclAvg); integers truncate. */
void emu_divide(void *buf, size_t n, ncclDataType_t dt, int divisor)
{
    int64_t d = divisor;
    switch (dt) {
    case ncclInt8:
        NATIVE_MAP(int8_t, p[i] / d);
        return;
    case ncclUint8:
        NATIVE_MAP(uint8_t, p[i] / (uint64_t)d);
        return;
    case ncclInt32:
        NATIVE_MAP(int32_t, p[i] / d);
        return;
    case ncclUint32:
        NATIVE_MAP(uint32_t, p[i] / (uint64_t)d);
        return;
    case ncclInt64:
        NATIVE_MAP(int64_t, p[i] / d);
        return;
    case ncclUint64:
        NATIVE_MAP(uint64_t, p[i] / (uint64_t)d);
        return;
    case ncclFloat32:
        NATIVE_MAP(float, p[i] / (float)d);
        return;
    case ncclFloat64:
        NATIVE_MAP(double, p[i] / (double)d);
        return;
    default:
        break;
    }
    const struct minifmt *f = mini_fmt(dt);
    if (!f)
        return;
    for (size_t i = 0; i < n; i++)
        mini_store(buf, i, mini_load(buf, i, f) / (double)d, f);
}

/* Read element 0 of a buffer of type dt as a double (PreMulSum scalars). */
double emu_load(const void *p, ncclDataType_t dt)
{
    switch (dt) {
    case ncclInt8:
        return *(const int8_t *)p;
    case ncclUint8:
        return *(const uint8_t *)p;
    case ncclInt32:
        return *(const int32_t *)p;
    case ncclUint32:
        return *(const uint32_t *)p;
    case ncclInt64:
        return (double)*(const int64_t *)p;
    case ncclUint64:
        return (double)*(const uint64_t *)p;
    case ncclFloat32:
        return *(const float *)p;
    case ncclFloat64:
        return *(const double *)p;
    default:
        break;
    }
    const struct minifmt *f = mini_fmt(dt);
    return f ? mini_load(p, 0, f) : 0.0;
}
