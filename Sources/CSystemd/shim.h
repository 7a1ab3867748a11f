#pragma once
#include <systemd/sd-bus.h>
/* The bus loop in LatchkeyDBus wakes its poll(2) with an eventfd; Glibc's Swift module does not export it. */
#include <sys/eventfd.h>
