/* The C tests' one assertion: counts checks and failures, prints each failure with its place, and
 * never stops a test program (each ends by printing "NAME: N checks, M failed" and exiting non-zero
 * when M > 0). Included once per test program. */
#ifndef LK_TESTS_CHECK_H
#define LK_TESTS_CHECK_H

#include <stdio.h>

static int checks, failures;

#define CHECK(cond, ...)                                            \
	do {                                                        \
		checks++;                                           \
		if (!(cond)) {                                      \
			failures++;                                 \
			printf("FAIL %s:%d: ", __FILE__, __LINE__); \
			printf(__VA_ARGS__);                        \
			printf("\n");                               \
		}                                                   \
	} while (0)

#endif
