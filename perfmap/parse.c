/* One perf-map line to an entry: what real producers write, counted by what is wrong. */
#include <errno.h>
#include <string.h>

#include "internal.h"

static const char *const reject_names[__PERFMAP_REJECT_MAX] = {
	[PERFMAP_REJECT_NONE] = "none",
	[PERFMAP_REJECT_GARBAGE] = "garbage",
	[PERFMAP_REJECT_BAD_UTF8] = "bad UTF-8",
	[PERFMAP_REJECT_ZERO_START] = "zero start",
	[PERFMAP_REJECT_ZERO_SIZE] = "zero size",
	[PERFMAP_REJECT_HUGE_SIZE] = "absurd size",
	[PERFMAP_REJECT_OVERFLOW] = "range overflow",
	[PERFMAP_REJECT_TOO_LONG] = "line too long",
};

static const char *const quirk_names[PERFMAP_QUIRK_COUNT] = {
	"0x prefix", "upper-case hex", "zero padding", "leading blank",
	"tab separator", "repeated blanks", "CRLF", "name under 3 bytes",
	"control byte in name",
};

const char *perfmap_reject_str(enum perfmap_reject reject)
{
	if ((unsigned int)reject >= __PERFMAP_REJECT_MAX)
		return "unknown";
	return reject_names[reject];
}

const char *perfmap_quirk_str(unsigned int bit)
{
	if (bit >= PERFMAP_QUIRK_COUNT)
		return "unknown";
	return quirk_names[bit];
}

static bool is_blank(unsigned char c)
{
	return c == ' ' || c == '\t';
}

/* A hex digit's value, or -EINVAL for a byte that is none. */
static int hex_value(unsigned char c, unsigned int *quirks)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') {
		*quirks |= PERFMAP_QUIRK_UPPER_HEX;
		return c - 'A' + 10;
	}
	return -EINVAL;
}

/* A hex field: optional 0x, at least one digit, at most 64 bits. */
static bool parse_hex(const unsigned char **pp, const unsigned char *end,
		      uint64_t *out, unsigned int *quirks)
{
	const unsigned char *p = *pp, *digits;
	uint64_t v = 0;
	int d;

	if (end - p >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		*quirks |= PERFMAP_QUIRK_HEX_PREFIX;
		p += 2;
	}
	digits = p;
	while (p < end && (d = hex_value(*p, quirks)) >= 0) {
		if (v >> 60)
			return false;
		v = v << 4 | (uint64_t)d;
		p++;
	}
	if (p == digits)
		return false;
	if (p - digits > 1 && digits[0] == '0')
		*quirks |= PERFMAP_QUIRK_ZERO_PAD;
	*out = v;
	*pp = p;
	return true;
}

/* One or more blanks; anything else after a number makes the line garbage. */
static bool skip_separator(const unsigned char **pp, const unsigned char *end,
			   unsigned int *quirks)
{
	const unsigned char *p = *pp;

	while (p < end && is_blank(*p)) {
		if (*p == '\t')
			*quirks |= PERFMAP_QUIRK_TAB;
		p++;
	}
	if (p == *pp)
		return false;
	if (p - *pp > 1)
		*quirks |= PERFMAP_QUIRK_MULTI_BLANK;
	*pp = p;
	return true;
}

static unsigned int name_quirks(const unsigned char *name, size_t len)
{
	unsigned int quirks = 0;
	size_t i;

	if (len < 3)
		quirks |= PERFMAP_QUIRK_SHORT_NAME;
	for (i = 0; i < len; i++) {
		if (name[i] < 0x20 || name[i] == 0x7f) {
			quirks |= PERFMAP_QUIRK_CONTROL;
			break;
		}
	}
	return quirks;
}

enum perfmap_reject perfmap_parse_line(const char *text, size_t len,
				       uint64_t max_size,
				       struct perfmap_record *rec)
{
	const unsigned char *p = (const unsigned char *)text;
	const unsigned char *end = p + len;
	unsigned int quirks = 0;

	memset(rec, 0, sizeof(*rec));
	if (!max_size)
		max_size = PERFMAP_SIZE_MAX_DEFAULT;

	if (p < end && end[-1] == '\r') {
		quirks |= PERFMAP_QUIRK_CRLF;
		end--;
	}
	if (p < end && is_blank(*p)) {
		quirks |= PERFMAP_QUIRK_LEADING_BLANK;
		while (p < end && is_blank(*p))
			p++;
	}
	if (!parse_hex(&p, end, &rec->start, &quirks) ||
	    !skip_separator(&p, end, &quirks) ||
	    !parse_hex(&p, end, &rec->size, &quirks) ||
	    !skip_separator(&p, end, &quirks) || p == end)
		return PERFMAP_REJECT_GARBAGE;

	rec->name = (const char *)p;
	rec->name_len = (size_t)(end - p);
	rec->quirks = quirks | name_quirks(p, rec->name_len);

	if (!rec->start)
		return PERFMAP_REJECT_ZERO_START;
	if (!rec->size)
		return PERFMAP_REJECT_ZERO_SIZE;
	/* The end, START + SIZE, must itself be an address consumers can hold. */
	if (rec->size > UINT64_MAX - rec->start)
		return PERFMAP_REJECT_OVERFLOW;
	if (rec->size > max_size)
		return PERFMAP_REJECT_HUGE_SIZE;
	if (!perfmap__utf8_valid(rec->name, rec->name_len))
		return PERFMAP_REJECT_BAD_UTF8;
	return PERFMAP_REJECT_NONE;
}
