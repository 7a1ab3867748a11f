/* The module's interface is exactly the PAM entry points: each one resolves through dlopen/dlsym,
 * and the dynamic symbol table defines nothing else (pam_latchkey.map, -fvisibility=hidden). */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const entry_points[] = {
	"pam_sm_authenticate", "pam_sm_setcred", "pam_sm_open_session", "pam_sm_close_session", "pam_sm_chauthtok",
};
enum { N_ENTRY = sizeof entry_points / sizeof entry_points[0] };

#include "check.h"

static int is_entry_point(const char *name)
{
	size_t i;

	for (i = 0; i < N_ENTRY; i++)
		if (strcmp(name, entry_points[i]) == 0)
			return (int)i;
	return -1;
}

/* Walks .dynsym of the file and returns how many defined global symbols it has; every one must
 * be an entry point, and every entry point must be there. */
static void check_dynamic_symbols(const char *path)
{
	struct stat st;
	const unsigned char *base;
	const ElfW(Ehdr) * eh;
	const ElfW(Shdr) * sh;
	int fd = open(path, O_RDONLY | O_CLOEXEC), seen[N_ENTRY] = { 0 }, found_dynsym = 0, ok;
	size_t i, k;

	CHECK(fd >= 0 && fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof *eh, "cannot open %s", path);
	if (fd < 0)
		return;
	base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	CHECK(base != MAP_FAILED, "mmap failed");
	if (base == MAP_FAILED)
		return;
	eh = (const ElfW(Ehdr) *)base;
	ok = memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 &&
	     eh->e_ident[EI_CLASS] == (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) &&
	     eh->e_shoff + (size_t)eh->e_shnum * sizeof *sh <= (size_t)st.st_size;
	CHECK(ok, "not a native ELF file, or section headers out of range");
	if (!ok)
		return;
	sh = (const ElfW(Shdr) *)(base + eh->e_shoff);
	for (i = 0; i < eh->e_shnum; i++) {
		const ElfW(Sym) * sym;
		const char *strtab;

		if (sh[i].sh_type != SHT_DYNSYM)
			continue;
		found_dynsym = 1;
		sym = (const ElfW(Sym) *)(base + sh[i].sh_offset);
		strtab = (const char *)(base + sh[sh[i].sh_link].sh_offset);
		for (k = 1; k < sh[i].sh_size / sizeof *sym; k++) {
			int bind = ELF64_ST_BIND(sym[k].st_info), e;
			const char *name = strtab + sym[k].st_name;

			if (sym[k].st_shndx == SHN_UNDEF || bind == STB_LOCAL)
				continue;
			e = is_entry_point(name);
			CHECK(e >= 0, "exported symbol '%s' is not a PAM entry point", name);
			CHECK(e < 0 || ELF64_ST_TYPE(sym[k].st_info) == STT_FUNC, "'%s' is not a function", name);
			if (e >= 0)
				seen[e]++;
		}
	}
	CHECK(found_dynsym, "no .dynsym section");
	for (i = 0; i < N_ENTRY; i++)
		CHECK(seen[i] == 1, "%s defined %d times in .dynsym", entry_points[i], seen[i]);
	munmap((void *)(uintptr_t)base, (size_t)st.st_size);
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "./pam_latchkey.so";
	char abs[4096];
	void *h;
	size_t i;

	/* dlopen searches the library path for a bare name; make it a path. */
	if (path[0] != '/' && getcwd(abs, sizeof abs - strlen(path) - 2) != NULL) {
		strcat(abs, "/");
		strcat(abs, path);
		path = abs;
	}
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	CHECK(h != NULL, "dlopen(%s): %s", path, dlerror());
	for (i = 0; h != NULL && i < N_ENTRY; i++)
		CHECK(dlsym(h, entry_points[i]) != NULL, "%s does not resolve", entry_points[i]);
	/* Internal functions must not resolve, even by name. */
	CHECK(h == NULL || dlsym(h, "lk_parse") == NULL, "lk_parse resolves");
	CHECK(h == NULL || dlsym(h, "lk_agent_call") == NULL, "lk_agent_call resolves");
	check_dynamic_symbols(path);
	if (h != NULL)
		dlclose(h);
	printf("test_exports: %d checks, %d failed\n", checks, failures);
	return failures == 0 ? 0 : 1;
}
