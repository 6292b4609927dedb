/* Driver calls passed straight through on this thread (ft/passthrough.h). */
#include "ft/passthrough.h"

_Thread_local int ft_passthrough;
