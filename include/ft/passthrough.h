/*
 * Calls the library makes into another library that calls the driver in
 * turn (libcufile, for the NVMe tier's GPUDirect Storage reads): while
 * ft_passthrough is nonzero on a thread, the hooks pass that thread's
 * driver calls straight through (no observation, no launch gate, no guard
 * of offloaded weights), so that they can neither take the engine's locks
 * (held, or awaited, by the caller) nor be taken for the program's work.
 */
#ifndef FT_PASSTHROUGH_H
#define FT_PASSTHROUGH_H

extern _Thread_local int ft_passthrough;

#endif
