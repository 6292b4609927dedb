int next_value(void)
{
	return 41;
}

/* Referenced by the program so that --as-needed keeps this library. */
int next_real_marker(void)
{
	return 1;
}
