/*
 * perfmapd's log lines: "perfmapd: <object>: <what happened>", one write
 * each. Names of processes and files are anyone's to choose, so every line
 * is escaped here, whole, after formatting: no call site can forget. And
 * anyone can make the agent act, so each kind of line is bounded in rate.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"

enum log_level log_max_level = LOG_INFO;
int log_fd = STDERR_FILENO;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

uint64_t (*log_clock)(void) = mono_ns;

static const char *const level_names[] = { "error", "warn", "info", "debug" };
static const char *const level_prefix[] = { "error: ", "warning: ", "", "" };

int log_parse_level(const char *s, enum log_level *out)
{
	unsigned int i;

	for (i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (!strcasecmp(s, level_names[i])) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -1;
}

void log_set_level(enum log_level level)
{
	__atomic_store_n(&log_max_level, level, __ATOMIC_RELAXED);
}

/* ---- escaping ---- */

/* The length of the valid UTF-8 sequence at @s (@len bytes left), or 0. */
static size_t utf8_len(const unsigned char *s, size_t len)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n, i;

	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4;
	else
		return 0;
	/* No overlong forms, no surrogates, nothing past U+10FFFF. */
	if (s[0] == 0xe0)
		lo = 0xa0;
	else if (s[0] == 0xed)
		hi = 0x9f;
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f;
	if (len < n || s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	/* U+0080..U+009F are controls too (a terminal may take U+009B for CSI). */
	if (s[0] == 0xc2 && s[1] < 0xa0)
		return 0;
	return n;
}

/*
 * Valid UTF-8, but invisible or reordering: the line and paragraph
 * separators (U+2028, U+2029), bidirectional controls (U+061C, U+200E,
 * U+200F, U+202A..U+202E, U+2066..U+2069), zero-width characters
 * (U+200B..U+200D, U+2060, U+FEFF). A name holding one could hide or
 * reorder what a reader of the log sees after it: escaped byte by byte.
 */
static bool invisible(const unsigned char *s, size_t n)
{
	if (n == 2)
		return s[0] == 0xd8 && s[1] == 0x9c;
	if (n != 3)
		return false;
	if (s[0] == 0xe2 && s[1] == 0x80)
		return (s[2] >= 0x8b && s[2] <= 0x8f) || (s[2] >= 0xa8 && s[2] <= 0xae);
	if (s[0] == 0xe2 && s[1] == 0x81)
		return s[2] == 0xa0 || (s[2] >= 0xa6 && s[2] <= 0xa9);
	return s[0] == 0xef && s[1] == 0xbb && s[2] == 0xbf;
}

/* The escape for the byte @c alone, into @out (5 bytes); its length. */
static size_t escape_byte(unsigned char c, char *out)
{
	static const char hex[] = "0123456789abcdef";
	char named = c == '\n' ? 'n' : c == '\t' ? 't' : c == '\r' ? 'r' : c == '\\' ? '\\' : 0;

	out[0] = '\\';
	if (named) {
		out[1] = named;
		return 2;
	}
	out[1] = 'x';
	out[2] = hex[c >> 4];
	out[3] = hex[c & 15];
	return 4;
}

size_t log_escape(char *dst, size_t cap, const char *src, size_t len, unsigned int flags)
{
	const unsigned char *s = (const unsigned char *)src;
	size_t i = 0, o = 0, n;
	char esc[5];

	if (!cap)
		return 0;
	while (i < len && s[i]) {
		n = s[i] >= 0x80 ? utf8_len(s + i, len - i) : 1;
		if (n > 1 && invisible(s + i, n))
			n = 0;  /* its first byte escaped; the rest, alone, are not UTF-8 */
		if (n == 1 && s[i] >= 0x20 && s[i] != 0x7f &&
		    (s[i] != '\\' || !(flags & LOG_ESC_REVERSIBLE))) {
			if (o + 1 >= cap)
				break;
			dst[o++] = (char)s[i++];
		} else if (n > 1) {
			if (o + n >= cap)
				break;
			memcpy(dst + o, s + i, n);
			o += n;
			i += n;
		} else {
			n = escape_byte(s[i], esc);
			if (o + n >= cap)
				break;
			memcpy(dst + o, esc, n);
			o += n;
			i++;
		}
	}
	dst[o] = '\0';
	return o;
}

/* ---- the flood bound: a token bucket per kind of line ---- */

/*
 * Kinds are looked up exactly, by their format's address, in an open-
 * addressed table larger than the agent's call sites (under 200): two kinds
 * never share tokens or take turns at a slot. Should it fill up anyway, the
 * kinds that find no slot share the last one, bounded like any other.
 */
#define KINDS 512
#define SAMPLE 200              /* bytes of a suppressed line kept for its summary */

struct kind {
	const char *fmt;            /* the call site; NULL: a free slot */
	enum log_level level;
	uint64_t tokens_at;         /* when @tokens was last brought up to date */
	double tokens;
	uint64_t suppressed;
	uint64_t suppressed_since;
	char sample[SAMPLE];        /* the last suppressed line, escaped */
};

static struct kind kinds[KINDS + 1];  /* the last: the kinds that found no slot */
/* The archiving thread logs too: the bound's state and the table of traps are shared. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void emit(const char *line, size_t n)
{
	/* One write per line: lines from a restart or a test harness never interleave. */
	if (write(log_fd, line, n) < 0)
		return;
}

static void summarize(struct kind *k, uint64_t now)
{
	char line[SAMPLE + 128];
	int n;

	if (!k->suppressed)
		return;
	n = snprintf(line, sizeof(line), "perfmapd: %s%llu similar lines suppressed in %.1f s, the last: %s\n",
		     level_prefix[k->level], (unsigned long long)k->suppressed,
		     (now > k->suppressed_since ? now - k->suppressed_since : 0) / 1e9, k->sample);
	emit(line, n < (int)sizeof(line) ? (size_t)n : sizeof(line) - 1);
	k->suppressed = 0;
}

/* The slot of @fmt's kind: its own, found or taken at first use. */
static struct kind *kind_of(const char *fmt, enum log_level level, uint64_t now)
{
	size_t h = ((uintptr_t)fmt >> 3) * 2654435761u, i;
	struct kind *k = &kinds[KINDS];

	for (i = 0; i < KINDS; i++) {
		struct kind *c = &kinds[(h + i) % KINDS];

		if (c->fmt == fmt || !c->fmt) {
			k = c;
			break;
		}
	}
	if (!k->fmt) {
		k->fmt = fmt;
		k->level = level;
		k->tokens_at = now;
		k->tokens = LOG_BURST;
	}
	return k;
}

/* Keep the start of @msg (escaped already) for the summary, cut between characters. */
static void sample(struct kind *k, const char *msg)
{
	size_t n = strlen(msg);

	if (n >= sizeof(k->sample)) {
		n = sizeof(k->sample) - 1;
		while (n && ((unsigned char)msg[n] & 0xc0) == 0x80)
			n--;
	}
	memcpy(k->sample, msg, n);
	k->sample[n] = '\0';
}

/*
 * May a line of @k go out at @now? Counted, with a sample, when not; the
 * summary is log_flush()'s, at most once a second per kind. A reading older
 * than the last (another thread's, taken just before) refills nothing.
 */
static bool admit(struct kind *k, uint64_t now, const char *msg)
{
	if (now > k->tokens_at) {
		k->tokens += (now - k->tokens_at) / 1e9 * LOG_PER_S;
		if (k->tokens > LOG_BURST)
			k->tokens = LOG_BURST;
		k->tokens_at = now;
	}
	if (k->tokens >= 1) {
		k->tokens -= 1;
		return true;
	}
	if (!k->suppressed++)
		k->suppressed_since = now;
	sample(k, msg);
	return false;
}

void log_flush(bool all)
{
	unsigned int i;
	uint64_t now;

	pthread_mutex_lock(&lock);
	now = log_clock();
	for (i = 0; i <= KINDS; i++)
		if (kinds[i].suppressed &&
		    (all || (now > kinds[i].suppressed_since &&
			     now - kinds[i].suppressed_since >= 1000000000)))
			summarize(&kinds[i], now);
	pthread_mutex_unlock(&lock);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	char raw[1024], line[4096];
	size_t n;
	va_list ap;

	/* Atomic: a SIGHUP sets it while workers log. */
	if (level > __atomic_load_n(&log_max_level, __ATOMIC_RELAXED))
		return;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	n = (size_t)snprintf(line, sizeof(line), "perfmapd: %s", level_prefix[level]);
	n += log_escape(line + n, sizeof(line) - n - 1, raw, sizeof(raw), 0);
	if (level != LOG_DEBUG) {
		uint64_t now;
		bool ok;

		/* The clock is read under the lock: readings come in order. */
		pthread_mutex_lock(&lock);
		now = log_clock();
		ok = admit(kind_of(fmt, level, now), now, line + strlen("perfmapd: "));
		pthread_mutex_unlock(&lock);
		if (!ok)
			return;
	}
	line[n++] = '\n';
	emit(line, n);
}

/* ---- warnings about the same object, once ---- */

#define SEEN 4096

static uint64_t seen[SEEN];

bool log_first_time(uint64_t dev, uint64_t ino, const char *name)
{
	uint64_t h = 14695981039346656037ull;   /* FNV-1a */
	const unsigned char *p;
	unsigned int i;
	bool first;

	for (i = 0; i < 8; i++)
		h = (h ^ ((dev >> (8 * i)) & 0xff)) * 1099511628211ull;
	for (i = 0; i < 8; i++)
		h = (h ^ ((ino >> (8 * i)) & 0xff)) * 1099511628211ull;
	for (p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	h |= 1;  /* 0 marks a free slot */
	pthread_mutex_lock(&lock);
	first = seen[h % SEEN] != h;
	seen[h % SEEN] = h;
	pthread_mutex_unlock(&lock);
	return first;
}
