/* A library that does nothing: what test_peer and the PAM tests preload into stand-in agents. */
int lk_test_preload_marker(void);

int lk_test_preload_marker(void)
{
	return 0;
}
