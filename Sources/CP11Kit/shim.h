#pragma once
/* p11-kit (libp11-kit-dev): the modules of the system's PKCS#11 configuration, and its pkcs11.h in the
   standard (compatibility) spelling, so that fields have the names of the PKCS#11 specification. */
#include <p11-kit/p11-kit.h>
#include <p11-kit/pkcs11.h>
