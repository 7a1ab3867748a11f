/* libFuzzer: the hand-off reply reader (handoff.c), which runs as root on bytes from a process of the
 * user. The input is what the "agent" sends; it waits in a socket pair whose other end is then shut,
 * so the reader gets exactly these bytes and then end of file, through the same calls as on the agent
 * socket: lk_agent_call (a session request) and lk_agent_hello (SO_PASSCRED, every chunk's writer
 * checked; here the writer is this process). Whatever it gets, a reader may accept only a complete
 * frame (length 6 to MAX_RESPONSE, version 1) and must report its status exactly. ASan and UBSan
 * (no recovery) turn any out-of-bounds access or undefined arithmetic into a crash, abort() a
 * broken property.
 *
 *   make -C pam fuzz FUZZ_SECONDS=60 */
#include "latchkey.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* handoff.c's cap on a response: version, status, flags and a message of at most 65,535 bytes. */
enum { MAX_RESPONSE = 7 + 65535 + 64, INPUT_CAP = 1 << 18 };

/* A socket whose peer has sent `data` and shut its side. -1 when the pair cannot be made. */
static int replying(const uint8_t *data, size_t size, int *peer)
{
	int sv[2], big = 1 << 20;
	size_t off = 0;
	ssize_t n;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return -1;
	(void)setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
	(void)setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
	/* Before the bytes are written, as on the agent socket: kernels attach the writer's credentials
	 * to what is sent while the receiver asks for them. */
	(void)setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &big, sizeof big);
	while (off < size && (n = write(sv[1], data + off, size - off)) > 0)
		off += (size_t)n;
	if (off < size || shutdown(sv[1], SHUT_WR) != 0) {
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	*peer = sv[1];
	return sv[0];
}

/* The frame the reader should accept, if any: 1 with its status, else 0. */
static int complete_frame(const uint8_t *d, size_t size, int32_t *status)
{
	uint32_t len;

	if (size < 10)
		return 0;
	len = (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3];
	if (len < 6 || len > MAX_RESPONSE || size - 4 < len || d[4] != 1)
		return 0;
	*status = (int32_t)((uint32_t)d[5] << 24 | (uint32_t)d[6] << 16 | (uint32_t)d[7] << 8 | d[8]);
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t token[LK_TOKEN_LEN] = { 0 };
	int32_t status = 12345, want = 0;
	int fd, peer, rc, whole;
	pid_t pid = 0;

	if (size > INPUT_CAP)
		return 0;
	whole = complete_frame(data, size, &want);
	if ((fd = replying(data, size, &peer)) >= 0) {
		rc = lk_agent_call(fd, LK_OP_SESSION_CLOSE, token, sizeof token, &status);
		if (rc != (whole ? 0 : -1) || (rc == 0 && status != want))
			abort();
		close(fd);
		close(peer);
	}
	if ((fd = replying(data, size, &peer)) >= 0) {
		rc = lk_agent_hello(fd, getuid(), &pid);
		if (rc != (whole && want == 0 ? 0 : -1) || (rc == 0 && pid != getpid()))
			abort();
		close(fd);
		close(peer);
	}
	return 0;
}
