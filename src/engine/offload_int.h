/* What the offloading files share beyond include/ft/engine.h. */
#ifndef FT_OFFLOAD_INT_H
#define FT_OFFLOAD_INT_H

#include "ft/engine.h"

/* Timing around the launch about to run on stream s (offload_timing.c). */
void ft_off_timing_before(struct ft_offload *o, CUstream s, const int *touched, int nt, int cur);
/* The GPU checksum kernel's sum over n bytes of the store at p (offload.c). */
uint64_t ft_off_host_checksum(const unsigned char *p, size_t n);

#endif
