/* A PAM module for tests/test_pam only: "authenticates" anybody and sets PAM_AUTHTOK to the value of
 * LK_TEST_AUTHTOK in the PAM environment, as pam_unix would after asking (an application cannot set
 * PAM_AUTHTOK itself). Never install it. */
#include <stddef.h>
#include <security/pam_appl.h>
#include <security/pam_modules.h>

#define PUBLIC __attribute__((visibility("default")))

PUBLIC int pam_sm_authenticate(pam_handle_t *pamh, int flags, int argc, const char **argv)
{
	const char *pw = pam_getenv(pamh, "LK_TEST_AUTHTOK");

	(void)flags, (void)argc, (void)argv;
	return pw != NULL && pam_set_item(pamh, PAM_AUTHTOK, pw) == PAM_SUCCESS ? PAM_SUCCESS : PAM_AUTH_ERR;
}

PUBLIC int pam_sm_setcred(pam_handle_t *pamh, int flags, int argc, const char **argv)
{
	(void)pamh, (void)flags, (void)argc, (void)argv;
	return PAM_SUCCESS;
}
