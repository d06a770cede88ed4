/* UTF-8 validation with the rules of Rust's str::from_utf8, which samply and blazesym apply. */
#include "internal.h"

/*
 * Overlong forms, UTF-16 surrogates (U+D800..U+DFFF) and code points above
 * U+10FFFF are invalid, as in RFC 3629 and Rust: a name samply would refuse
 * must never pass as valid here.
 */
size_t perfmap__utf8_seq(const unsigned char *s, size_t len)
{
	unsigned char c = s[0];
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n, i;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (len < n)
		return 0;

	/* Only the second byte has a narrower range, depending on the first. */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

bool perfmap__utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, n;

	while (i < len) {
		/* Runs of ASCII are the common case in names. */
		if (p[i] < 0x80) {
			i++;
			continue;
		}
		n = perfmap__utf8_seq(p + i, len - i);
		if (!n)
			return false;
		i += n;
	}
	return true;
}
