/*
 * Host-to-device copy time as a function of size, from a few measured points
 * (pinned memory, measured once at start): log-log interpolation between
 * points; below the smallest point the smallest point's time (latency
 * bound); above the largest, the largest point's bandwidth.  Pure C.
 */
#ifndef FT_COPY_CURVE_H
#define FT_COPY_CURVE_H

#include <stdint.h>

#include "ft/profile.h"

/* Milliseconds to copy bytes; points sorted by increasing bytes, n >= 1. */
double ft_curve_ms(const struct ft_curve_point *c, uint32_t n, uint64_t bytes);

#endif
