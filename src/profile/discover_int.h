/*
 * What discover.c and discover_match.c (the restart's match) share of the
 * region list, not for other layers: include/ft/discover.h is the API.
 */
#ifndef FT_DISCOVER_INT_H
#define FT_DISCOVER_INT_H

#include "ft/discover.h"

/* Index of the first region not before (alloc a, offset o): where one
 * at (a, o) is, or would go. */
uint32_t ft_disc_lower(const struct ft_discover *d, uint64_t a, uint64_t o);
/* Room for n regions: 0, or -ENOMEM (d as it was). */
int ft_disc_reserve(struct ft_discover *d, uint32_t n);
/* Region r inserted at index i (room reserved; the caller keeps the
 * (alloc, offset) order). */
void ft_disc_insert(struct ft_discover *d, uint32_t i, const struct ft_disc_region *r);
/* The bytes from region i's start within which reads inside it are views:
 * up to `end` bytes, its parts' starts, and beyond the last one the
 * smallest distance between consecutive starts (a row, an expert). */
uint64_t ft_disc_views_in(const struct ft_discover *d, uint32_t i, uint64_t end);

#endif
