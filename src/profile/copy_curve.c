/* Copy-time curve (include/ft/copy_curve.h). */
#include "ft/copy_curve.h"

#include <math.h>

double ft_curve_ms(const struct ft_curve_point *c, uint32_t n, uint64_t bytes)
{
	if (!n)
		return 0.0;
	if (bytes <= c[0].bytes)
		return c[0].ms;
	if (bytes >= c[n - 1].bytes)
		return c[n - 1].ms * (double)bytes / (double)c[n - 1].bytes;
	uint32_t i = 1;
	while (c[i].bytes < bytes)
		i++;
	if (c[i].bytes == bytes)
		return c[i].ms;
	double x0 = log((double)c[i - 1].bytes), x1 = log((double)c[i].bytes);
	double y0 = log(c[i - 1].ms > 0 ? c[i - 1].ms : 1e-9);
	double y1 = log(c[i].ms > 0 ? c[i].ms : 1e-9);
	double x = log((double)bytes);
	return exp(y0 + (y1 - y0) * (x - x0) / (x1 - x0));
}

double ft_curve_coded_ms(const struct ft_curve_point *c, uint32_t nc,
			 const struct ft_curve_point *d, uint32_t nd, uint64_t coded, uint64_t raw,
			 uint64_t piece)
{
	uint64_t np = piece ? (coded + piece - 1) / piece : 1;
	if (!np)
		return 0.0;
	double copy = ft_curve_ms(c, nc, coded / np), decode = ft_curve_ms(d, nd, raw / np);
	/* the first piece's copy or the last one's decode overlaps nothing */
	return (double)np * (copy > decode ? copy : decode) + (copy < decode ? copy : decode);
}
