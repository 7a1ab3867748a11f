#pragma once
#include <systemd/sd-bus.h>
/* The bus loop in LatchkeyDesktop wakes its poll(2) with an eventfd; Glibc's Swift module does not export it. */
#include <sys/eventfd.h>
