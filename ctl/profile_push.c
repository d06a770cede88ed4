/*
 * The pusher: a thread that sends each period's requests through libcurl,
 * oldest first, and retries what a server did not take from a bounded
 * spool (memory, then a directory). The sampling thread only queues.
 */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "profile_push.h"

#define SECRET_MAX 4096
#define RESPONSE_MAX (64u << 10)
#define BACKOFF_MIN_MS 1000ull
#define BACKOFF_MAX_MS 60000ull
#define RETRY_AFTER_MAX_MS 600000ull
#define SPOOL_MAGIC "perfmapctl-push 1"

struct prof_push {
	struct prof_push_opts o;
	char *base;                      /* the URL without a trailing '/' */
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct push_req **q;             /* oldest first */
	size_t n, cap;
	struct push_req *in_flight;      /* q[0] while the thread sends it: neither spilled nor dropped */
	uint64_t mem_bytes, disk_bytes, next_seq;
	int spool_fd;
	bool stopping;
	uint64_t drain_deadline_ms;
	struct prof_push_stats st;
	char said[16][48];               /* what was said once: a status, a reason */
	size_t nsaid;
	CURL *curl;
	char secrets[2][SECRET_MAX];     /* the last read: kept out of every message */
	unsigned int seed;               /* the backoff's jitter */
	bool has_token, has_basic;       /* their files exist, at this request */
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* First time only for @key: a 4xx or a broken file each said once, not every period. */
static bool first_time(struct prof_push *p, const char *key)
{
	for (size_t i = 0; i < p->nsaid; i++)
		if (!strcmp(p->said[i], key))
			return false;
	if (p->nsaid < sizeof(p->said) / sizeof(*p->said))
		snprintf(p->said[p->nsaid++], sizeof(p->said[0]), "%s", key);
	return true;
}

/* ---- the spool directory ---- */

static void spool_name(uint64_t seq, char *buf, size_t len)
{
	snprintf(buf, len, "%016llu.req", (unsigned long long)seq);
}

/* @r's body to the spool directory (whole, then named): its memory is then freed. */
static int spool_write(struct prof_push *p, struct push_req *r)
{
	char name[32], tmp[40], head[8192 + 512];
	int fd, err = 0, hlen;
	ssize_t w;

	spool_name(r->seq, name, sizeof(name));
	snprintf(tmp, sizeof(tmp), ".%s.tmp", name);
	hlen = snprintf(head, sizeof(head), "%s\n%s\n%s\n%s\n%llu %u\n", SPOOL_MAGIC,
			prof_push_protocol_name(p->o.protocol), r->target, r->content_type,
			(unsigned long long)r->samples, r->series);
	if (hlen < 0 || (size_t)hlen >= sizeof(head))
		return -ENAMETOOLONG;
	fd = openat(p->spool_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	w = write(fd, head, (size_t)hlen);
	if (w == hlen)
		w = write(fd, r->body, r->len);
	if (w < 0 || (size_t)w != r->len)
		err = w < 0 ? -errno : -ENOSPC;
	if (close(fd) && !err)
		err = -errno;
	if (!err && renameat(p->spool_fd, tmp, p->spool_fd, name))
		err = -errno;
	if (err) {
		unlinkat(p->spool_fd, tmp, 0);
		return err;
	}
	free(r->body);
	r->body = NULL;
	r->on_disk = true;
	r->disk_len = (size_t)hlen + r->len;
	return 0;
}

/*
 * A spooled request's file: its header into @r (when not NULL) and its body
 * into *@body (when not NULL). Only a regular file of ours, bounded.
 */
static int spool_read(struct prof_push *p, uint64_t seq, struct push_req *r, uint8_t **body,
		      size_t *len)
{
	char name[32], *buf = NULL, *line[6], *nl;
	struct stat st;
	size_t off = 0;
	ssize_t got;
	int fd, err = -EINVAL;

	spool_name(seq, name, sizeof(name));
	fd = openat(p->spool_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (uint64_t)st.st_size > p->o.spool_max + 16384)
		goto close_fd;
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		err = -ENOMEM;
		goto close_fd;
	}
	while (off < (size_t)st.st_size && (got = read(fd, buf + off, (size_t)st.st_size - off)) > 0)
		off += (size_t)got;
	if (off != (size_t)st.st_size)
		goto close_fd;
	buf[off] = '\0';
	line[0] = buf;
	for (int i = 0; i < 5; i++) {
		nl = memchr(line[i], '\n', off - (size_t)(line[i] - buf));
		if (!nl)
			goto close_fd;
		*nl = '\0';
		line[i + 1] = nl + 1;
	}
	if (strcmp(line[0], SPOOL_MAGIC) || strcmp(line[1], prof_push_protocol_name(p->o.protocol))) {
		err = -EPROTO;
		goto close_fd;
	}
	if (r) {
		unsigned long long samples;
		unsigned int series;

		if (sscanf(line[4], "%llu %u", &samples, &series) != 2)
			goto close_fd;
		r->target = strdup(line[2]);
		r->content_type = strdup(line[3]);
		r->samples = samples;
		r->series = series;
		r->len = off - (size_t)(line[5] - buf);
		r->disk_len = off;
		if (!r->target || !r->content_type) {
			err = -ENOMEM;
			goto close_fd;
		}
	}
	if (body) {
		*len = off - (size_t)(line[5] - buf);
		*body = malloc(*len ? *len : 1);
		if (!*body) {
			err = -ENOMEM;
			goto close_fd;
		}
		memcpy(*body, line[5], *len);
	}
	err = 0;
close_fd:
	free(buf);
	close(fd);
	return err;
}

static int seq_cmp(const void *a, const void *b)
{
	const struct push_req *x = *(struct push_req *const *)a, *y = *(struct push_req *const *)b;

	return (x->seq > y->seq) - (x->seq < y->seq);
}

/* What an earlier run left waiting in the directory, oldest first; pieces of a write cut short removed. */
static int spool_load(struct prof_push *p)
{
	struct push_req *r, **nq;
	struct dirent *de;
	unsigned long long seq;
	int dfd, err;
	char end;
	DIR *d;

	dfd = fcntl(p->spool_fd, F_DUPFD_CLOEXEC, 0);
	d = dfd < 0 ? NULL : fdopendir(dfd);
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return -errno;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' && strstr(de->d_name, ".tmp")) {
			unlinkat(p->spool_fd, de->d_name, 0);
			continue;
		}
		if (strlen(de->d_name) != 20 || sscanf(de->d_name, "%16llu.re%c", &seq, &end) != 2 ||
		    end != 'q')
			continue;
		r = calloc(1, sizeof(*r));
		if (!r)
			break;
		r->seq = seq;
		err = spool_read(p, seq, r, NULL, NULL);
		if (err) {
			if (first_time(p, "spool-unreadable"))
				ctl_error("profile: push: %s/%s: %s; left there, not sent", p->o.spool_dir,
					  de->d_name,
					  err == -EPROTO ? "written for another protocol" : strerror(-err));
			push_req_free(r);
			continue;
		}
		r->on_disk = true;
		if (p->n == p->cap) {
			size_t cap = p->cap ? 2 * p->cap : 64;

			nq = realloc(p->q, cap * sizeof(*nq));
			if (!nq) {
				push_req_free(r);
				break;
			}
			p->q = nq;
			p->cap = cap;
		}
		p->q[p->n++] = r;
		p->disk_bytes += r->disk_len;
		if (seq >= p->next_seq)
			p->next_seq = seq + 1;
	}
	closedir(d);
	if (p->n)
		qsort(p->q, p->n, sizeof(*p->q), seq_cmp);
	return 0;
}

/* The spool directory: made if missing; refused unless it is ours and nobody else's to write. */
static int spool_open(struct prof_push *p)
{
	struct stat st;

	if (mkdir(p->o.spool_dir, 0700) && errno != EEXIST)
		return -errno;
	p->spool_fd = open(p->o.spool_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (p->spool_fd < 0)
		return -errno;
	/* Another user who could write there could have us send their files with our credentials. */
	if (fstat(p->spool_fd, &st) || st.st_uid != geteuid() || (st.st_mode & 022))
		return -EPERM;
	return spool_load(p);
}

/* ---- the queue (under the lock) ---- */

static void queue_remove(struct prof_push *p, size_t i)
{
	struct push_req *r = p->q[i];
	char name[32];

	if (r->on_disk) {
		spool_name(r->seq, name, sizeof(name));
		unlinkat(p->spool_fd, name, 0);
		p->disk_bytes -= r->disk_len;
	} else {
		p->mem_bytes -= r->len;
	}
	push_req_free(r);
	memmove(&p->q[i], &p->q[i + 1], (p->n - i - 1) * sizeof(*p->q));
	p->n--;
}

/* Memory past its bound to the directory, then the oldest past the spool's bound dropped, counted. */
static void queue_bound(struct prof_push *p)
{
	/*
	 * With a directory, memory holds a quarter of the bound: what waits
	 * for a server that is down goes to the disk soon, where a restart
	 * finds it.
	 */
	uint64_t bound = p->spool_fd >= 0 ? p->o.spool_max / 4 : p->o.spool_max;
	uint64_t mem_max = bound < PROF_PUSH_MEM_MAX ? bound : PROF_PUSH_MEM_MAX;
	size_t i;
	int err;

	for (i = 0; p->spool_fd >= 0 && p->mem_bytes > mem_max && i < p->n; i++) {
		struct push_req *r = p->q[i];

		if (r->on_disk || r == p->in_flight)
			continue;
		err = spool_write(p, r);
		if (err) {
			if (first_time(p, "spool-write"))
				ctl_error("profile: push: cannot write to the spool %s: %s; what waits is kept in memory, then dropped",
					  p->o.spool_dir, strerror(-err));
			break;
		}
		p->mem_bytes -= r->len;
		p->disk_bytes += r->disk_len;
	}
	for (i = 0; i < p->n && (p->mem_bytes + p->disk_bytes > p->o.spool_max ||
				 (p->spool_fd < 0 && p->mem_bytes > mem_max));) {
		if (p->q[i] == p->in_flight) {
			i++;
			continue;
		}
		p->st.dropped++;
		p->st.dropped_samples += p->q[i]->samples;
		queue_remove(p, i);
	}
}

void prof_push__submit(struct prof_push *p, struct push_req **reqs, size_t n)
{
	struct push_req **nq;

	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < n; i++) {
		if (p->n == p->cap) {
			size_t cap = p->cap ? 2 * p->cap : 64;

			nq = realloc(p->q, cap * sizeof(*nq));
			if (!nq) {
				p->st.dropped++;
				p->st.dropped_samples += reqs[i]->samples;
				push_req_free(reqs[i]);
				continue;
			}
			p->q = nq;
			p->cap = cap;
		}
		reqs[i]->seq = p->next_seq++;
		p->q[p->n++] = reqs[i];
		p->mem_bytes += reqs[i]->len;
	}
	free(reqs);
	queue_bound(p);
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

/* ---- one request ---- */

struct response {
	char body[RESPONSE_MAX];
	size_t len;
	uint64_t retry_after_ms;
	int grpc_status;              /* -1: none seen */
	char grpc_message[256];
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct response *rs = arg;
	size_t n = size * nmemb, room = sizeof(rs->body) - 1 - rs->len;

	memcpy(rs->body + rs->len, data, n < room ? n : room);
	rs->len += n < room ? n : room;
	rs->body[rs->len] = '\0';
	return n;
}

/* A header or, over HTTP/2, a trailer: Retry-After, grpc-status and grpc-message. */
static void header_line(struct response *rs, const char *h, size_t n)
{
	char v[256];
	size_t k;
	time_t when;

	k = strcspn(h, ":");
	if (k >= n)
		return;
	snprintf(v, sizeof(v), "%.*s", (int)(n - k - 1), h + k + 1);
	v[strcspn(v, "\r\n")] = '\0';
	for (char *s = v; *s == ' '; memmove(s, s + 1, strlen(s)))
		;
	if (k == 11 && !strncasecmp(h, "retry-after", 11)) {
		char *end;
		unsigned long long s = strtoull(v, &end, 10);

		if (end != v && !*end)
			rs->retry_after_ms = s * 1000;
		else if ((when = curl_getdate(v, NULL)) > 0 && when > time(NULL))
			rs->retry_after_ms = (uint64_t)(when - time(NULL)) * 1000;
	} else if (k == 11 && !strncasecmp(h, "grpc-status", 11)) {
		rs->grpc_status = atoi(v);
	} else if (k == 12 && !strncasecmp(h, "grpc-message", 12)) {
		snprintf(rs->grpc_message, sizeof(rs->grpc_message), "%s", v);
	}
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *arg)
{
	header_line(arg, data, size * nmemb);
	return size * nmemb;
}

/* gRPC-web puts its status in a trailer frame (flag 0x80) at the end of the body. */
static void grpc_web_trailers(struct response *rs)
{
	size_t off = 0, flen;
	const uint8_t *b = (const uint8_t *)rs->body;

	while (off + 5 <= rs->len) {
		flen = (size_t)b[off + 1] << 24 | (size_t)b[off + 2] << 16 | (size_t)b[off + 3] << 8 |
		       b[off + 4];
		if (off + 5 + flen > rs->len)
			return;
		if (b[off] & 0x80) {
			const char *t = rs->body + off + 5, *e = t + flen, *nl;

			for (; t < e; t = nl + 1) {
				nl = memchr(t, '\n', (size_t)(e - t));
				if (!nl)
					nl = e;
				header_line(rs, t, (size_t)(nl - t));
			}
		}
		off += 5 + flen;
	}
}

static int progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct prof_push *p = arg;
	int stop;

	(void)dt, (void)dn, (void)ut, (void)un;
	/* At the end, a hanging server is not waited for past the drain's deadline. */
	pthread_mutex_lock(&p->lock);
	stop = p->stopping && now_ms() >= p->drain_deadline_ms;
	pthread_mutex_unlock(&p->lock);
	return stop;
}

/* A credential file's first line into @buf: a regular file, at most SECRET_MAX - 1 bytes. */
static int read_secret(const char *path, char *buf)
{
	struct stat st;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size >= SECRET_MAX) {
		close(fd);
		return -EINVAL;
	}
	n = read(fd, buf, SECRET_MAX - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	return buf[0] ? 0 : -ENODATA;
}

/* @s escaped for the log, and no credential read in it (a server that echoes a header). */
static void clean(const struct prof_push *p, const char *s, char *out, size_t cap)
{
	char tmp[1024], *hit;

	snprintf(tmp, sizeof(tmp), "%s", s);
	for (int i = 0; i < 2; i++) {
		size_t n = strlen(p->secrets[i]);

		while (n >= 4 && (hit = strstr(tmp, p->secrets[i])))
			memset(hit, '*', n);
	}
	ctl_escape(out, cap, tmp, strlen(tmp) > 300 ? 300 : strlen(tmp));
}

enum outcome { SENT, RETRY, REJECTED };

/* A Connect error's message ({"code": ..., "message": ...}), else the body's start. */
static void error_text(const struct response *rs, char *out, size_t cap)
{
	json_object *j = rs->len ? json_tokener_parse(rs->body) : NULL, *m;

	if (j && json_object_object_get_ex(j, "message", &m))
		snprintf(out, cap, "%s", json_object_get_string(m));
	else if (rs->grpc_message[0])
		snprintf(out, cap, "%s", rs->grpc_message);
	else
		snprintf(out, cap, "%.*s", (int)(rs->len < cap - 1 ? rs->len : cap - 1), rs->body);
	json_object_put(j);
}

/* gRPC's codes a later try can succeed with: the rest are the request's fault. */
static bool grpc_retryable(int code)
{
	return code == 1 || code == 2 || code == 4 || code == 8 || code == 10 || code == 13 || code == 14;
}

/*
 * Which credential files are there: a file given that does not exist is no
 * credential (an optional Secret not made, said once), one that does is used.
 * Both there is refused: which one the server wanted cannot be told.
 */
static int credentials_present(struct prof_push *p, char *why, size_t whylen)
{
	const char *files[2] = { p->o.token_file, p->o.basic_auth_file };
	bool *has[2] = { &p->has_token, &p->has_basic };
	char key[48];

	for (int i = 0; i < 2; i++) {
		*has[i] = files[i] && access(files[i], F_OK) == 0;
		snprintf(key, sizeof(key), "absent-%d", i);
		if (files[i] && !*has[i] && errno == ENOENT && first_time(p, key))
			ctl_error("profile: push: %s %s does not exist: pushing without it",
				  i ? "--push-basic-auth-file" : "--push-token-file", files[i]);
	}
	if (p->has_token && p->has_basic) {
		snprintf(why, whylen, "both --push-token-file and --push-basic-auth-file exist: give one");
		return -EINVAL;
	}
	return 0;
}

static int setup_request(struct prof_push *p, const struct push_req *r, const uint8_t *body,
			 size_t len, struct response *rs, struct curl_slist **hl, char *errbuf,
			 char *why, size_t whylen)
{
	bool grpc = p->o.protocol == PUSH_PARCA_GRPC, web = p->o.protocol == PUSH_PARCA;
	char url[8192 + 512], h[SECRET_MAX + 64], *colon;
	CURL *c = p->curl;
	int err;

	curl_easy_reset(c);
	snprintf(url, sizeof(url), "%s%s", p->base, r->target);
	snprintf(h, sizeof(h), "Content-Type: %s", r->content_type);
	*hl = curl_slist_append(*hl, h);
	*hl = curl_slist_append(*hl, "Expect:");
	snprintf(h, sizeof(h), "User-Agent: perfmapctl/%d.%d", PERFMAP_VERSION_MAJOR, PERFMAP_VERSION_MINOR);
	*hl = curl_slist_append(*hl, h);
	if (p->o.protocol == PUSH_PYROSCOPE)
		*hl = curl_slist_append(*hl, "Connect-Protocol-Version: 1");
	if (grpc)
		*hl = curl_slist_append(*hl, "TE: trailers");
	if (web)
		*hl = curl_slist_append(*hl, "X-Grpc-Web: 1");
	if (p->o.tenant && *p->o.tenant) {
		snprintf(h, sizeof(h), "X-Scope-OrgID: %s", p->o.tenant);
		*hl = curl_slist_append(*hl, h);
	}
	for (size_t i = 0; i < p->o.nheaders; i++)
		*hl = curl_slist_append(*hl, p->o.headers[i]);
	err = credentials_present(p, why, whylen);
	if (err)
		return err;
	if (p->has_token) {
		err = read_secret(p->o.token_file, p->secrets[0]);
		if (err) {
			snprintf(why, whylen, "--push-token-file %s: %s", p->o.token_file,
				 err == -EINVAL ? "not a regular file under 4 KiB" : strerror(-err));
			return err;
		}
		snprintf(h, sizeof(h), "Authorization: Bearer %s", p->secrets[0]);
		*hl = curl_slist_append(*hl, h);
		explicit_bzero(h, sizeof(h));
	}
	if (p->has_basic) {
		err = read_secret(p->o.basic_auth_file, p->secrets[1]);
		colon = err ? NULL : strchr(p->secrets[1], ':');
		if (!colon) {
			snprintf(why, whylen, "--push-basic-auth-file %s: %s", p->o.basic_auth_file,
				 err == -EINVAL ? "not a regular file under 4 KiB" :
				 err ? strerror(-err) : "no user:password line");
			return err ? err : -EINVAL;
		}
		*colon = '\0';
		curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(c, CURLOPT_USERNAME, p->secrets[1]);
		curl_easy_setopt(c, CURLOPT_PASSWORD, colon + 1);
		/* What stays to be kept out of messages: the password. */
		memmove(p->secrets[1], colon + 1, strlen(colon + 1) + 1);
	}
	if (!*hl) {
		snprintf(why, whylen, "no memory");
		return -ENOMEM;
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);   /* credentials go to the URL given, nowhere else */
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hl);
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)p->o.timeout_ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)p->o.timeout_ms);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, p);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, rs);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, rs);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	if (p->o.ca_file)
		curl_easy_setopt(c, CURLOPT_CAINFO, p->o.ca_file);
	/*
	 * A new connection for each gRPC request: Debian 12's libcurl (7.88)
	 * fails the second request on a reused h2c connection after a response
	 * with trailers ("Error in the HTTP2 framing layer"; the curl tool does
	 * the same). A connection a period costs nothing that matters.
	 */
	if (grpc)
		curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
	if (grpc)
		curl_easy_setopt(c, CURLOPT_HTTP_VERSION,
				 (long)(strncmp(p->base, "https:", 6) ? CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE :
									 CURL_HTTP_VERSION_2TLS));
	else
		curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	return 0;
}

/* Send @r once: what came of it, with why in @why and how long to wait in *@wait_ms. */
static enum outcome send_one(struct prof_push *p, const struct push_req *r, const uint8_t *body,
			     size_t len, char *why, size_t whylen, uint64_t *wait_ms, long *status)
{
	static struct response rs;   /* the thread's own: one request at a time */
	char errbuf[CURL_ERROR_SIZE] = "", text[1024];
	struct curl_slist *hl = NULL;
	enum outcome out;
	CURLcode cc;

	rs.len = 0;
	rs.body[0] = '\0';
	rs.retry_after_ms = 0;
	rs.grpc_status = -1;
	rs.grpc_message[0] = '\0';
	*status = 0;
	*wait_ms = 0;
	if (setup_request(p, r, body, len, &rs, &hl, errbuf, why, whylen)) {
		curl_slist_free_all(hl);
		return RETRY;
	}
	cc = curl_easy_perform(p->curl);
	curl_slist_free_all(hl);
	curl_easy_setopt(p->curl, CURLOPT_HTTPHEADER, NULL);
	if (cc != CURLE_OK) {
		snprintf(why, whylen, "%s", errbuf[0] ? errbuf : curl_easy_strerror(cc));
		return RETRY;
	}
	curl_easy_getinfo(p->curl, CURLINFO_RESPONSE_CODE, status);
	if (p->o.protocol == PUSH_PARCA)
		grpc_web_trailers(&rs);
	*wait_ms = rs.retry_after_ms;
	if (*status >= 200 && *status < 300 &&
	    (p->o.protocol < PUSH_PARCA || rs.grpc_status == 0))
		return SENT;
	error_text(&rs, text, sizeof(text));
	if (*status >= 200 && *status < 300) {
		out = rs.grpc_status < 0 || grpc_retryable(rs.grpc_status) ? RETRY : REJECTED;
		snprintf(why, whylen, "grpc-status %d%s%.900s", rs.grpc_status, text[0] ? ": " : "", text);
		return out;
	}
	out = *status == 408 || *status == 429 || *status >= 500 ? RETRY : REJECTED;
	snprintf(why, whylen, "HTTP %ld%s%.900s", *status, text[0] ? ": " : "", text);
	return out;
}

static uint64_t backoff_ms(struct prof_push *p, unsigned int attempts)
{
	uint64_t b = BACKOFF_MIN_MS << (attempts > 6 ? 6 : attempts - 1);

	if (b > BACKOFF_MAX_MS)
		b = BACKOFF_MAX_MS;
	/* Jitter, so that a fleet's nodes do not come back at one instant. */
	return b - b / 4 + (uint64_t)rand_r(&p->seed) % (b / 2 + 1);
}

/* What a try came to, under the lock: @r is q[0], never moved while in flight. */
static void settle(struct prof_push *p, struct push_req *r, enum outcome out, const char *why,
		   uint64_t wait_ms, long status)
{
	char msg[400], key[48];

	if (out == SENT) {
		p->st.pushed++;
		p->st.pushed_samples += r->samples;
		p->st.bytes += r->len;
		queue_remove(p, 0);
		return;
	}
	clean(p, why, msg, sizeof(msg));
	snprintf(p->st.last_error, sizeof(p->st.last_error), "%.255s", msg);
	if (out == REJECTED) {
		p->st.rejected++;
		p->st.rejected_samples += r->samples;
		snprintf(key, sizeof(key), "status-%ld", status);
		if (first_time(p, key))
			ctl_error("profile: push: %s%.*s: %s; not retried (said once; counted as rejected)",
				  p->base, (int)strcspn(r->target, "?"), r->target, msg);
		queue_remove(p, 0);
		return;
	}
	p->st.retried++;
	r->attempts++;
	if (!wait_ms)
		wait_ms = backoff_ms(p, r->attempts);
	if (wait_ms > RETRY_AFTER_MAX_MS)
		wait_ms = RETRY_AFTER_MAX_MS;
	r->next_ms = now_ms() + wait_ms;
}

static void *pusher_main(void *arg)
{
	struct prof_push *p = arg;
	char why[1024];
	struct push_req *r;
	uint8_t *body;
	size_t len;
	uint64_t wait_ms, now;
	struct timespec ts;
	enum outcome out;
	long status;
	int err;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		now = now_ms();
		if (p->stopping && (!p->n || now >= p->drain_deadline_ms))
			break;
		if (!p->n) {
			pthread_cond_wait(&p->cond, &p->lock);
			continue;
		}
		r = p->q[0];
		if (now < r->next_ms) {
			uint64_t until = r->next_ms;

			if (p->stopping && p->drain_deadline_ms < until)
				until = p->drain_deadline_ms;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += (time_t)((until - now) / 1000);
			ts.tv_nsec += (long)((until - now) % 1000) * 1000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&p->cond, &p->lock, &ts);
			continue;
		}
		p->in_flight = r;
		body = r->body;
		len = r->len;
		if (r->on_disk) {
			err = spool_read(p, r->seq, NULL, &body, &len);
			if (err) {
				p->in_flight = NULL;
				p->st.dropped++;
				p->st.dropped_samples += r->samples;
				snprintf(p->st.last_error, sizeof(p->st.last_error),
					 "spooled request %llu unreadable: %s", (unsigned long long)r->seq,
					 strerror(-err));
				queue_remove(p, 0);
				continue;
			}
		}
		pthread_mutex_unlock(&p->lock);
		why[0] = '\0';
		out = send_one(p, r, body, len, why, sizeof(why), &wait_ms, &status);
		if (body != r->body)
			free(body);
		pthread_mutex_lock(&p->lock);
		p->in_flight = NULL;
		settle(p, r, out, why, wait_ms, status);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

static void curl_start(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct prof_push *prof_push__new(const struct prof_push_opts *o)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct prof_push *p;
	size_t n;
	int err;

	pthread_once(&once, curl_start);
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->o = *o;
	p->spool_fd = -1;
	p->seed = (unsigned int)(now_ms() ^ (uint64_t)getpid() << 16);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	if (!p->o.spool_max)
		p->o.spool_max = PROF_PUSH_SPOOL_MAX_DEFAULT;
	if (!p->o.timeout_ms)
		p->o.timeout_ms = PROF_PUSH_TIMEOUT_MS_DEFAULT;
	p->base = strdup(o->url);
	if (!p->base)
		goto free_push;
	n = strlen(p->base);
	while (n && p->base[n - 1] == '/')
		p->base[--n] = '\0';
	if (o->spool_dir) {
		err = spool_open(p);
		if (err) {
			ctl_error("profile: push: --push-spool %s: %s", o->spool_dir,
				  err == -EPERM ? "not a directory of ours that only we can write" :
						  strerror(-err));
			errno = -err;
			goto free_push;
		}
	}
	p->curl = curl_easy_init();
	if (!p->curl) {
		ctl_error("profile: push: libcurl cannot start");
		errno = ENOMEM;
		goto free_push;
	}
	err = pthread_create(&p->thread, NULL, pusher_main, p);
	if (err) {
		errno = err;
		goto free_push;
	}
	p->started = true;
	return p;
free_push:
	prof_push__free(p);
	return NULL;
}

void prof_push__stats(struct prof_push *p, struct prof_push_stats *s)
{
	pthread_mutex_lock(&p->lock);
	*s = p->st;
	s->waiting = p->n;
	s->waiting_bytes = p->mem_bytes + p->disk_bytes;
	s->waiting_disk = p->disk_bytes;
	pthread_mutex_unlock(&p->lock);
}

void prof_push__drain(struct prof_push *p, uint64_t drain_ms)
{
	if (!p)
		return;
	if (p->started) {
		pthread_mutex_lock(&p->lock);
		p->stopping = true;
		p->drain_deadline_ms = now_ms() + drain_ms;
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);
		pthread_join(p->thread, NULL);
		p->started = false;
	}
	/* What still waits: kept for the next start when there is a directory, else dropped, counted. */
	for (size_t i = 0; i < p->n && p->spool_fd >= 0; i++) {
		struct push_req *r = p->q[i];

		if (!r->on_disk && !spool_write(p, r)) {
			p->mem_bytes -= r->len;
			p->disk_bytes += r->disk_len;
		}
	}
	for (size_t i = 0; i < p->n;) {
		if (p->q[i]->on_disk) {
			i++;
			continue;
		}
		p->st.dropped++;
		p->st.dropped_samples += p->q[i]->samples;
		queue_remove(p, i);
	}
	/* Headers count in the directory's bound: the oldest past it go, counted. */
	while (p->n && p->mem_bytes + p->disk_bytes > p->o.spool_max) {
		p->st.dropped++;
		p->st.dropped_samples += p->q[0]->samples;
		queue_remove(p, 0);
	}
}

void prof_push__free(struct prof_push *p)
{
	if (!p)
		return;
	prof_push__drain(p, 0);
	for (size_t i = 0; i < p->n; i++)
		push_req_free(p->q[i]);
	free(p->q);
	if (p->curl)
		curl_easy_cleanup(p->curl);
	if (p->spool_fd >= 0)
		close(p->spool_fd);
	explicit_bzero(p->secrets, sizeof(p->secrets));
	free(p->base);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p);
}
