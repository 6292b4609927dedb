/* Phase machine (include/ft/phase.h). */
#include "ft/phase.h"

void ft_phases_init(struct ft_phases *p, long discovery_iters, long profiling_iters)
{
	p->phase = FT_PHASE_DISCOVERY;
	p->in_phase = p->total = 0;
	/* Each driven phase takes at least one pass, as upstream. */
	p->discovery = discovery_iters > 1 ? (uint64_t)discovery_iters : 1;
	p->profiling = profiling_iters > 1 ? (uint64_t)profiling_iters : 1;
}

int ft_phases_pass(struct ft_phases *p)
{
	p->total++;
	if (p->phase == FT_PHASE_INFERENCE)
		return 0;
	p->in_phase++;
	uint64_t need = p->phase == FT_PHASE_DISCOVERY ? p->discovery : p->profiling;
	if (p->in_phase < need)
		return 0;
	p->phase++;
	p->in_phase = 0;
	return 1;
}

uint64_t ft_phases_iters_before_inference(const struct ft_phases *p)
{
	return p->discovery + p->profiling;
}

const char *ft_phase_name(int phase)
{
	static const char *const names[] = { "DISCOVERY", "PROFILING", "INFERENCE" };
	return phase >= 0 && phase <= FT_PHASE_INFERENCE ? names[phase] : "?";
}
