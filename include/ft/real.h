/*
 * The real driver functions: one typed pointer per row of
 * include/ft/hooks.def (FT_HOOK and FT_USE rows), typed with the
 * PFN_<base>_v<version> typedefs of cudaTypedefs.h so an ABI slip is a
 * compile error.  The interposer fills it from libcuda; the engine and the
 * profile code reach the driver only through it, which lets unit tests hand
 * them a table of fakes.
 */
#ifndef FT_REAL_H
#define FT_REAL_H

#include "ft/cuda.h"

struct ft_real {
#define FT_HOOK(sym, base, ver, sfx) PFN_##base##_v##ver##sfx sym;
#define FT_USE(sym, base, ver, sfx) PFN_##base##_v##ver##sfx sym;
#define FT_RT_HOOK(sym)
#include "ft/hooks.def"
#undef FT_HOOK
#undef FT_USE
#undef FT_RT_HOOK
};

#endif
