#pragma once
/* Linux-PAM's application interface, for the agent's user checks (docs/ACCESS-CONTROL.md §4):
   pam_start_confdir (Linux-PAM 1.4+), pam_authenticate, pam_end. */
#include <security/pam_appl.h>
