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
/* Milliseconds of a coded load of raw bytes whose image has coded bytes:
 * the image copied in pieces of at most piece bytes (copy curve c), each
 * decoded (decode curve d, of raw bytes) while the next is copied: the
 * longer of a piece's copy and decode for each piece, and the shorter once
 * (the first copy, or the last decode, that nothing overlaps). */
double ft_curve_coded_ms(const struct ft_curve_point *c, uint32_t nc,
			 const struct ft_curve_point *d, uint32_t nd, uint64_t coded, uint64_t raw,
			 uint64_t piece);

#endif
