/* The Argon2id parameter limits of a keybag (docs/KEYBAG.md, "Parameter validation" and "Derivation
 * limits"): the one definition that pam_latchkey (this directory) and the agent (Sources/LatchkeyCrypto,
 * through the CKeybagLimits module, Sources/CKeybagLimits/module.modulemap) both read, so that the two
 * never disagree about which keybag they derive from. Constants only, so that Swift imports it as it is. */
#ifndef LATCHKEY_KEYBAG_LIMITS_H
#define LATCHKEY_KEYBAG_LIMITS_H

/* What the format accepts ("Reading", step 8): t >= 1, 1 <= p <= 16 lanes, m from 8 KiB per lane
 * (Argon2's own minimum) to 4 GiB. A keybag outside these is corrupt. */
enum {
	LK_MIN_T = 1,
	LK_MAX_LANES = 16,
	LK_MIN_KIB_PER_LANE = 8,
	LK_MAX_MEMORY_KIB = 4194304 /* 4 GiB */
};

/* What is ever derived from a keybag. pam_latchkey derives in root processes (a login, sudo, a display
 * manager) and the agent for any process of its user, both from parameters stored in a file the user,
 * or anything running as the user, can write: a keybag beyond these is refused without deriving, so
 * that it can neither hang nor starve a login or the agent. Creation and password changes stay within
 * them, so latchkey never writes a keybag it would refuse. (Named for the module, which had them first.) */
enum {
	LK_PAM_MAX_T = 16,
	LK_PAM_MAX_M_KIB = 1048576, /* 1 GiB */
	LK_PAM_MAX_P = 8
};

/* New keybags and new parameters: at least 64 MiB, unless weak parameters are allowed (tests only). */
enum { LK_MIN_CREATE_MEMORY_KIB = 65536 };

#endif
