# latchkey: `make` builds the release programs and the PAM module; `sudo make install` installs them.
# PREFIX (default /usr/local) and DESTDIR are honoured; debian/rules runs the same two targets with
# PREFIX=/usr, so the Debian package and a hand installation put the same files in the same places.
#
#   latchkey                      $(BINDIR)                       the command
#   latchkeyd                     $(PREFIX)/libexec/latchkey      the agent, where pam_latchkey trusts it
#   pam_latchkey.so               $(SECUREDIR)                    PAM's module directory
#   latchkey (pam-auth-update)    $(PAMCONFIGDIR)                 Debian's PAM profiles (only there)
#   latchkey (PAM service)        $(SYSCONFDIR)/pam.d             the user check (docs/ACCESS-CONTROL.md)
#   *.service (D-Bus)             $(DATADIR)/dbus-1/services      Secret Service activation
#   latchkeyd.socket, .service    $(PREFIX)/lib/systemd/user      optional socket activation
#   latchkey.portal, portal file  $(DATADIR)/xdg-desktop-portal, $(APPLICATIONSDIR)
#   man pages, documentation      $(MANDIR), $(DOCDIR)
#
# Paths the programs hold (the agent's, in the PAM module, the D-Bus and systemd files) are set from
# PREFIX at build and install time; PAM's own directories (/etc/pam.d, /usr/share/pam-configs) are
# where PAM reads them whatever the PREFIX.

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBEXECDIR ?= $(PREFIX)/libexec
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
DOCDIR ?= $(DATADIR)/doc/latchkey
SYSCONFDIR ?= /etc
PAM_LIBDIR := $(shell pkg-config --variable=libdir pam 2>/dev/null)
SECUREDIR ?= $(if $(PAM_LIBDIR),$(PAM_LIBDIR),/lib)/security
# pam-auth-update (Debian, Ubuntu) reads profiles only here; empty where there is no pam-auth-update.
# Whether pam-auth-update enables the profile by itself: only the Debian package says yes (its
# postinst runs pam-auth-update); a hand installation is enabled by hand (pam-auth-update --enable).
PAMDEFAULT ?= no
PAMCONFIGDIR ?= $(if $(wildcard /usr/sbin/pam-auth-update),/usr/share/pam-configs,)
DBUSSERVICEDIR ?= $(DATADIR)/dbus-1/services
SYSTEMDUSERUNITDIR ?= $(PREFIX)/lib/systemd/user
PORTALDIR ?= $(DATADIR)/xdg-desktop-portal/portals
# The agent reads application files from /usr/share/latchkey/applications.d (packages) and
# /etc/latchkey/applications.d (the administrator) only: a hand installation is the administrator's.
APPLICATIONSDIR ?= $(if $(filter /usr,$(PREFIX)),/usr/share/latchkey/applications.d,$(SYSCONFDIR)/latchkey/applications.d)

AGENTDIR = $(LIBEXECDIR)/latchkey
AGENT = $(AGENTDIR)/latchkeyd

# The Swift 6 toolchain from swift.org (not a Debian package): `swift` on PATH, else /opt/swift.
SWIFT ?= $(or $(shell command -v swift 2>/dev/null),/opt/swift/usr/bin/swift)
SWIFT_SCRATCH ?= .build-release
# The Swift runtime is linked in (--static-swift-stdlib): the programs need only the system's
# libraries, never a toolchain at run time (and pam_latchkey refuses an agent that maps code from a
# file root does not own). Full RELRO, as Debian's hardening flags ask of C programs.
SWIFT_FLAGS = -c release --static-swift-stdlib -Xlinker -z -Xlinker relro -Xlinker -z -Xlinker now
SWIFT_BIN = $(SWIFT_SCRATCH)/release

# The PAM module is built from a copy of pam/ in its own directory: the agent path is compiled in, and
# pam/'s own objects (built for the tests by `make -C pam`) are left as they are.
PAM_BUILD = $(SWIFT_SCRATCH)/pam

INSTALL ?= install

all: build

build: build-swift build-pam

build-swift:
	$(SWIFT) build $(SWIFT_FLAGS) --scratch-path $(SWIFT_SCRATCH) --product latchkeyd
	$(SWIFT) build $(SWIFT_FLAGS) --scratch-path $(SWIFT_SCRATCH) --product latchkey

build-pam:
	rm -rf $(PAM_BUILD)
	mkdir -p $(PAM_BUILD)
	cp pam/*.c pam/*.h pam/pam_latchkey.map pam/Makefile $(PAM_BUILD)/
	$(MAKE) -C $(PAM_BUILD) PREFIX=$(PREFIX) LATCHKEYD=$(AGENT) pam_latchkey.so
	echo $(AGENT) > $(PAM_BUILD)/agent-path

install:
	@test -x $(SWIFT_BIN)/latchkeyd -a -x $(SWIFT_BIN)/latchkey -a -f $(PAM_BUILD)/pam_latchkey.so \
		|| { echo "make install: run make first (as yourself; install as root)"; exit 1; }
	@# The module holds the agent's path: it must be the one this installation puts the agent at.
	@test "$$(cat $(PAM_BUILD)/agent-path)" = $(AGENT) \
		|| { echo "make install: the PAM module was built for $$(cat $(PAM_BUILD)/agent-path), not $(AGENT):" \
			"run make with the same PREFIX"; exit 1; }
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(AGENTDIR) $(DESTDIR)$(SECUREDIR) \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(DBUSSERVICEDIR) \
		$(DESTDIR)$(SYSTEMDUSERUNITDIR) $(DESTDIR)$(PORTALDIR) $(DESTDIR)$(APPLICATIONSDIR) \
		$(DESTDIR)$(DOCDIR) $(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(SYSCONFDIR)/pam.d
	$(INSTALL) -m 0755 $(SWIFT_BIN)/latchkey $(DESTDIR)$(BINDIR)/latchkey
	$(INSTALL) -m 0755 $(SWIFT_BIN)/latchkeyd $(DESTDIR)$(AGENT)
	@# Earlier installations put the agent on PATH, beside latchkey, where the library would find it first.
	rm -f $(DESTDIR)$(BINDIR)/latchkeyd
	$(INSTALL) -m 0644 $(PAM_BUILD)/pam_latchkey.so $(DESTDIR)$(SECUREDIR)/pam_latchkey.so
	$(INSTALL) -m 0644 man/latchkey.1 $(DESTDIR)$(MANDIR)/man1/latchkey.1
	$(INSTALL) -m 0644 man/latchkeyd.8 man/pam_latchkey.8 $(DESTDIR)$(MANDIR)/man8/
	@# By hand with PREFIX=/usr this path may be gnome-keyring's file: never overwrite another provider's
	@# (the Debian package diverts it instead, and gives it back on removal).
	@dst=$(DESTDIR)$(DBUSSERVICEDIR)/org.freedesktop.secrets.service; \
	if [ -z "$(DESTDIR)" ] && [ -e $$dst ] && ! grep -q '^Exec=.*/latchkeyd ' $$dst; then \
		echo "not replacing $$dst: another Secret Service provider's (docs/SECRET-SERVICE.md §7)"; \
	else \
		echo "installing $$dst"; \
		sed -e 's|/usr/local/libexec/latchkey/latchkeyd|$(AGENT)|' contrib/dbus/org.freedesktop.secrets.service \
			> $$dst && chmod 0644 $$dst; \
	fi
	for unit in latchkeyd.socket latchkeyd.service; do \
		sed -e 's|/usr/local/libexec/latchkey/latchkeyd|$(AGENT)|' contrib/systemd/$$unit \
			> $(DESTDIR)$(SYSTEMDUSERUNITDIR)/$$unit || exit 1; \
	done
	chmod 0644 $(DESTDIR)$(SYSTEMDUSERUNITDIR)/latchkeyd.socket $(DESTDIR)$(SYSTEMDUSERUNITDIR)/latchkeyd.service
	$(INSTALL) -m 0644 contrib/latchkey.portal $(DESTDIR)$(PORTALDIR)/latchkey.portal
	@# The application files are the administrator's (a narrowed or removed grant stays as it is).
	@if [ -z "$(DESTDIR)" ] && [ -e $(APPLICATIONSDIR)/xdg-desktop-portal.conf ]; then \
		echo "keeping $(APPLICATIONSDIR)/xdg-desktop-portal.conf"; \
	else \
		$(INSTALL) -m 0644 contrib/applications.d/xdg-desktop-portal.conf $(DESTDIR)$(APPLICATIONSDIR)/; \
	fi
	$(INSTALL) -m 0644 README.md $(DESTDIR)$(DOCDIR)/
	$(INSTALL) -m 0644 docs/*.md $(DESTDIR)$(DOCDIR)/
	$(INSTALL) -m 0644 contrib/portals.conf contrib/pam.d/README $(DESTDIR)$(DOCDIR)/examples/
	for f in login gdm-password swaylock passwd; do \
		$(INSTALL) -m 0644 contrib/pam.d/$$f $(DESTDIR)$(DOCDIR)/examples/pam.d-$$f || exit 1; \
	done
	$(INSTALL) -m 0755 contrib/dbus/latchkey-file-prompter $(DESTDIR)$(DOCDIR)/examples/
	@if [ -n "$(PAMCONFIGDIR)" ]; then \
		$(INSTALL) -d $(DESTDIR)$(PAMCONFIGDIR) && \
		sed -e 's/^Default: .*/Default: $(PAMDEFAULT)/' contrib/pam-auth-update/latchkey \
			> $(DESTDIR)$(PAMCONFIGDIR)/latchkey && chmod 0644 $(DESTDIR)$(PAMCONFIGDIR)/latchkey && \
		echo "installed $(PAMCONFIGDIR)/latchkey: enable it with pam-auth-update --enable latchkey"; \
	fi
	@# The user-check stack is the administrator's to change: a hand installation keeps one already there.
	@if [ -z "$(DESTDIR)" ] && [ -e $(SYSCONFDIR)/pam.d/latchkey ]; then \
		echo "keeping $(SYSCONFDIR)/pam.d/latchkey (the new one is $(DOCDIR)/examples/pam.d-latchkey)"; \
		$(INSTALL) -m 0644 contrib/pam.d/latchkey $(DESTDIR)$(DOCDIR)/examples/pam.d-latchkey; \
	else \
		$(INSTALL) -m 0644 contrib/pam.d/latchkey $(DESTDIR)$(SYSCONFDIR)/pam.d/latchkey; \
	fi
	@$(MAKE) --no-print-directory -C pam install-machine-secret DESTDIR=$(DESTDIR)

# Everything install put there except /etc/pam.d/latchkey (configuration) and /var/lib/latchkey (the
# machine secret: removing it closes every ThisDeviceOnly item of every user). Disable the PAM
# profile first (pam-auth-update --remove latchkey). Users' keychains are never touched.
uninstall:
	@# Take the module out of /etc/pam.d/common-* before its file goes.
	@if [ -z "$(DESTDIR)" ] && [ -n "$(PAMCONFIGDIR)" ] && command -v pam-auth-update >/dev/null; then \
		pam-auth-update --package --remove latchkey; \
	fi
	rm -f $(DESTDIR)$(BINDIR)/latchkey $(DESTDIR)$(AGENT) $(DESTDIR)$(SECUREDIR)/pam_latchkey.so \
		$(DESTDIR)$(MANDIR)/man1/latchkey.1 $(DESTDIR)$(MANDIR)/man8/latchkeyd.8 \
		$(DESTDIR)$(MANDIR)/man8/pam_latchkey.8 \
		$(DESTDIR)$(SYSTEMDUSERUNITDIR)/latchkeyd.socket $(DESTDIR)$(SYSTEMDUSERUNITDIR)/latchkeyd.service \
		$(DESTDIR)$(PORTALDIR)/latchkey.portal
	@# The application file only as installed: an administrator's change stays.
	@if cmp -s contrib/applications.d/xdg-desktop-portal.conf $(DESTDIR)$(APPLICATIONSDIR)/xdg-desktop-portal.conf; \
	then rm -f $(DESTDIR)$(APPLICATIONSDIR)/xdg-desktop-portal.conf; fi
	if [ -n "$(PAMCONFIGDIR)" ]; then rm -f $(DESTDIR)$(PAMCONFIGDIR)/latchkey; fi
	dst=$(DESTDIR)$(DBUSSERVICEDIR)/org.freedesktop.secrets.service; \
	if grep -q '^Exec=.*/latchkeyd ' $$dst 2>/dev/null; then rm -f $$dst; fi
	rm -rf $(DESTDIR)$(DOCDIR)
	-rmdir $(DESTDIR)$(AGENTDIR) $(DESTDIR)$(APPLICATIONSDIR)

clean:
	rm -rf $(SWIFT_SCRATCH)

.PHONY: all build build-swift build-pam install uninstall clean
