/* RTLD_NEXT through the dlsym override must still mean "after the caller":
 * the shim's lookup finds next_real's definition (41 + 1), not itself. */
#include <stdio.h>

int next_value(void);
int next_real_marker(void);

int main(void)
{
	int v = next_value() * next_real_marker();
	printf("next_value() = %d\n", v);
	return v == 42 ? 0 : 1;
}
