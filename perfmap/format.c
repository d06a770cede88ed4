/* Canonical perf-map lines: "%lx %lx %s\n" with names that can never break a line. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/*
 * No stdio here: these run in a fork child's atfork handler, where only
 * async-signal-safe code may run, and on the writer's hot path.
 */

static const char hex_digits[16] = "0123456789abcdef";

static size_t put_hex(char *dst, uint64_t v)
{
	/* Digits known up front: written in place, last first. */
	size_t n = v ? (size_t)(64 - __builtin_clzll(v) + 3) / 4 : 1, i = n;

	do {
		dst[--i] = hex_digits[v & 0xf];
		v >>= 4;
	} while (i);
	return n;
}

size_t perfmap__utoa(char *dst, uint64_t v)
{
	char tmp[20];
	size_t n = 0, i;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (i = 0; i < n; i++)
		dst[i] = tmp[n - 1 - i];
	return n;
}

/*
 * Whether all 8 bytes of @w are printable ASCII (0x20..0x7e): no byte below
 * 0x20 and none above 0x7e, tested for all lanes at once ("hasless" and
 * "hasmore" from Bit Twiddling Hacks; exact for the any-byte question).
 */
static bool all_printable(uint64_t w)
{
	const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
	uint64_t below = (w - 0x20 * ones) & ~w;
	uint64_t above = (w + ones) | w;

	return !((below | above) & highs);
}

/* One character at @src: copied if valid, else one '?' per bad byte. */
static size_t sanitize_char(char *dst, const unsigned char *src, size_t len)
{
	size_t n;

	if (src[0] >= 0x20 && src[0] < 0x7f) {
		dst[0] = (char)src[0];
		return 1;
	}
	/* Control bytes (newline and CR among them), DEL, invalid UTF-8. */
	n = src[0] < 0x80 ? 0 : perfmap__utf8_seq(src, len);
	if (!n) {
		dst[0] = '?';
		return 1;
	}
	memcpy(dst, src, n);
	return n;
}

void perfmap__sanitize_name(char *dst, const char *src, size_t len)
{
	const unsigned char *s = (const unsigned char *)src;
	size_t i = 0;
	uint64_t w;

	/* Names are nearly always plain ASCII: eight bytes per step. */
	while (i < len) {
		if (len - i >= 8) {
			memcpy(&w, s + i, 8);
			if (all_printable(w)) {
				memcpy(dst + i, &w, 8);
				i += 8;
				continue;
			}
		}
		i += sanitize_char(dst + i, s + i, len - i);
	}
}

size_t perfmap__name_cut(const char *name, size_t len, size_t max)
{
	const unsigned char *s = (const unsigned char *)name;
	size_t cut;

	if (len <= max)
		return len;
	/* Back off continuation bytes so the cut never splits a character. */
	cut = max;
	while (cut > 0 && (s[cut] & 0xc0) == 0x80)
		cut--;
	return cut;
}

size_t perfmap__format_line(char *dst, uint64_t start, uint64_t size,
			    const char *name, size_t name_len)
{
	size_t n;

	n = put_hex(dst, start);
	dst[n++] = ' ';
	n += put_hex(dst + n, size);
	dst[n++] = ' ';
	perfmap__sanitize_name(dst + n, name, name_len);
	n += name_len;
	dst[n++] = '\n';
	return n;
}

int perfmap__map_path(char *dst, size_t cap, const char *dir, pid_t pid)
{
	static const char prefix[] = "/perf-", suffix[] = ".map";
	size_t dlen = strlen(dir), n;
	char digits[20];

	n = perfmap__utoa(digits, (uint64_t)pid);
	if (dlen + sizeof(prefix) - 1 + n + sizeof(suffix) > cap)
		return -ENAMETOOLONG;
	memcpy(dst, dir, dlen);
	memcpy(dst + dlen, prefix, sizeof(prefix) - 1);
	dlen += sizeof(prefix) - 1;
	memcpy(dst + dlen, digits, n);
	memcpy(dst + dlen + n, suffix, sizeof(suffix));
	return 0;
}

int perfmap__write_all(int fd, const char *buf, size_t len)
{
	ssize_t n;

	while (len) {
		n = write(fd, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}
