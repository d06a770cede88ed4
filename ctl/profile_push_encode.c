/*
 * The requests of a period in each server's protocol: Pyroscope's Connect
 * PushRequest and its legacy /ingest form, Parca's WriteRawRequest framed
 * for gRPC and gRPC-web. Encoded with protobuf-c from ctl/proto/.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "profile_pprof.h"
#include "profile_push.h"
#include "profilestore.pb-c.h"
#include "push.pb-c.h"

static const char *const protocol_names[] = {
	[PUSH_PYROSCOPE] = "pyroscope",
	[PUSH_PYROSCOPE_INGEST] = "pyroscope-ingest",
	[PUSH_PARCA] = "parca",
	[PUSH_PARCA_GRPC] = "parca-grpc",
};

int prof_push_protocol_parse(const char *s, enum prof_push_protocol *out)
{
	for (size_t i = 0; i < sizeof(protocol_names) / sizeof(*protocol_names); i++)
		if (!strcmp(s, protocol_names[i])) {
			*out = (enum prof_push_protocol)i;
			return 0;
		}
	return -EINVAL;
}

const char *prof_push_protocol_name(enum prof_push_protocol p)
{
	return protocol_names[p];
}

void push_req_free(struct push_req *r)
{
	if (!r)
		return;
	free(r->target);
	free(r->content_type);
	free(r->body);
	free(r);
}

static struct push_req *req_new(const char *target, const char *content_type, uint8_t *body,
				size_t len)
{
	struct push_req *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->target = strdup(target);
	r->content_type = strdup(content_type);
	r->body = body;
	r->len = len;
	if (!r->target || !r->content_type) {
		r->body = NULL;
		push_req_free(r);
		return NULL;
	}
	return r;
}

/* A profile's ID, as Pyroscope's clients make them: a random (version 4) UUID. */
static void uuid4(char out[37])
{
	uint8_t b[16] = { 0 };

	if (getrandom(b, sizeof(b), 0) != sizeof(b))
		for (size_t i = 0; i < sizeof(b); i++)
			b[i] = (uint8_t)rand();
	b[6] = (b[6] & 0x0f) | 0x40;
	b[8] = (b[8] & 0x3f) | 0x80;
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
		 b[14], b[15]);
}

static struct push_req *encode_pyroscope(const struct push_period *p)
{
	const struct prof_series_set *set = p->set;
	Push__V1__PushRequest req = PUSH__V1__PUSH_REQUEST__INIT;
	Push__V1__RawProfileSeries *series, **sp;
	Push__V1__LabelPair *pairs, **pp;
	Push__V1__RawSample *raw, **rp;
	struct push_req *r = NULL;
	size_t nlabels = 0, k = 0, len;
	char (*ids)[37];
	uint8_t *buf;

	for (size_t i = 0; i < set->n; i++)
		nlabels += set->series[i].nlabels;
	series = calloc(set->n + 1, sizeof(*series));
	sp = calloc(set->n + 1, sizeof(*sp));
	raw = calloc(set->n + 1, sizeof(*raw));
	rp = calloc(set->n + 1, sizeof(*rp));
	ids = calloc(set->n + 1, sizeof(*ids));
	pairs = calloc(nlabels + 1, sizeof(*pairs));
	pp = calloc(nlabels + 1, sizeof(*pp));
	if (!series || !sp || !raw || !rp || !ids || !pairs || !pp)
		goto free_all;
	for (size_t i = 0; i < set->n; i++) {
		const struct prof_series *s = &set->series[i];

		push__v1__raw_profile_series__init(&series[i]);
		series[i].labels = pp + k;
		series[i].n_labels = s->nlabels;
		for (size_t l = 0; l < s->nlabels; l++, k++) {
			push__v1__label_pair__init(&pairs[k]);
			pairs[k].name = s->labels[l].name;
			pairs[k].value = s->labels[l].value;
			pp[k] = &pairs[k];
		}
		push__v1__raw_sample__init(&raw[i]);
		raw[i].raw_profile.data = p->profiles[i];
		raw[i].raw_profile.len = p->lens[i];
		uuid4(ids[i]);
		raw[i].id = ids[i];
		rp[i] = &raw[i];
		series[i].samples = &rp[i];
		series[i].n_samples = 1;
		sp[i] = &series[i];
	}
	req.series = sp;
	req.n_series = set->n;
	len = push__v1__push_request__get_packed_size(&req);
	buf = malloc(len ? len : 1);
	if (!buf)
		goto free_all;
	push__v1__push_request__pack(&req, buf);
	r = req_new("/push.v1.PusherService/Push", "application/proto", buf, len);
	if (!r)
		free(buf);
free_all:
	free(series);
	free(sp);
	free(raw);
	free(rp);
	free(ids);
	free(pairs);
	free(pp);
	return r;
}

/* gRPC's length-prefixed message: a flag byte (0, not compressed), the length big-endian, the message. */
static uint8_t *grpc_frame(size_t len, uint8_t **msg)
{
	uint8_t *buf = malloc(len + 5);

	if (!buf)
		return NULL;
	buf[0] = 0;
	buf[1] = (uint8_t)(len >> 24);
	buf[2] = (uint8_t)(len >> 16);
	buf[3] = (uint8_t)(len >> 8);
	buf[4] = (uint8_t)len;
	*msg = buf + 5;
	return buf;
}

static struct push_req *encode_parca(const struct push_period *p, const char *tenant, bool web)
{
	const struct prof_series_set *set = p->set;
	Parca__Profilestore__V1alpha1__WriteRawRequest req =
		PARCA__PROFILESTORE__V1ALPHA1__WRITE_RAW_REQUEST__INIT;
	Parca__Profilestore__V1alpha1__RawProfileSeries *series, **sp;
	Parca__Profilestore__V1alpha1__LabelSet *sets;
	Parca__Profilestore__V1alpha1__Label *labels, **lp;
	Parca__Profilestore__V1alpha1__RawSample *raw, **rp;
	struct push_req *r = NULL;
	size_t nlabels = 0, k = 0, len;
	uint8_t *buf, *msg;

	for (size_t i = 0; i < set->n; i++)
		nlabels += set->series[i].nlabels;
	series = calloc(set->n + 1, sizeof(*series));
	sp = calloc(set->n + 1, sizeof(*sp));
	sets = calloc(set->n + 1, sizeof(*sets));
	raw = calloc(set->n + 1, sizeof(*raw));
	rp = calloc(set->n + 1, sizeof(*rp));
	labels = calloc(nlabels + 1, sizeof(*labels));
	lp = calloc(nlabels + 1, sizeof(*lp));
	if (!series || !sp || !sets || !raw || !rp || !labels || !lp)
		goto free_all;
	for (size_t i = 0; i < set->n; i++) {
		const struct prof_series *s = &set->series[i];

		parca__profilestore__v1alpha1__raw_profile_series__init(&series[i]);
		parca__profilestore__v1alpha1__label_set__init(&sets[i]);
		sets[i].labels = lp + k;
		sets[i].n_labels = s->nlabels;
		for (size_t l = 0; l < s->nlabels; l++, k++) {
			parca__profilestore__v1alpha1__label__init(&labels[k]);
			labels[k].name = s->labels[l].name;
			labels[k].value = s->labels[l].value;
			lp[k] = &labels[k];
		}
		series[i].labels = &sets[i];
		parca__profilestore__v1alpha1__raw_sample__init(&raw[i]);
		raw[i].raw_profile.data = p->profiles[i];
		raw[i].raw_profile.len = p->lens[i];
		rp[i] = &raw[i];
		series[i].samples = &rp[i];
		series[i].n_samples = 1;
		sp[i] = &series[i];
	}
	req.series = sp;
	req.n_series = set->n;
	req.tenant = (char *)(tenant ? tenant : "");
	/* Native frames' addresses are in their file's terms (perfmap_frame), as Parca's normalizer makes them. */
	req.normalized = true;
	len = parca__profilestore__v1alpha1__write_raw_request__get_packed_size(&req);
	buf = grpc_frame(len, &msg);
	if (!buf)
		goto free_all;
	parca__profilestore__v1alpha1__write_raw_request__pack(&req, msg);
	r = req_new("/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw",
		    web ? "application/grpc-web+proto" : "application/grpc+proto", buf, len + 5);
	if (!r)
		free(buf);
free_all:
	free(series);
	free(sp);
	free(sets);
	free(raw);
	free(rp);
	free(labels);
	free(lp);
	return r;
}

/* @s percent-encoded into @out at *@o (RFC 3986's unreserved kept); false when it does not fit. */
static bool url_put(char *out, size_t cap, size_t *o, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	unsigned char c;

	for (; *s; s++) {
		c = (unsigned char)*s;
		if (*o + 4 > cap)
			return false;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    strchr("-._~", c)) {
			out[(*o)++] = (char)c;
		} else {
			out[(*o)++] = '%';
			out[(*o)++] = hex[c >> 4];
			out[(*o)++] = hex[c & 15];
		}
	}
	out[*o] = '\0';
	return true;
}

/*
 * A value in the ingest API's series key, app{k=v,...}: its parser splits
 * at ',', '=', '{' and '}', which therefore become '_'.
 */
static void key_value(char *out, size_t cap, const char *v)
{
	size_t i;

	for (i = 0; v[i] && i + 1 < cap; i++)
		out[i] = strchr(",={}", v[i]) ? '_' : v[i];
	out[i] = '\0';
}

/*
 * The app's name in the ingest API's series key: its parser takes
 * [a-zA-Z0-9_.-/] only there (pod:<uid> becomes pod_<uid>).
 */
static void app_name(char *out, size_t cap, const char *v)
{
	size_t i;

	for (i = 0; v[i] && i + 1 < cap; i++)
		out[i] = (v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' && v[i] <= 'Z') ||
			 (v[i] >= '0' && v[i] <= '9') || strchr("_.-/", v[i]) ? v[i] : '_';
	out[i] = '\0';
}

/*
 * One series to the ingest API: format=pprof with the profile as the raw
 * body (its handler reads the body as pprof whenever format=pprof is given;
 * the multipart form is its other, format-less, way).
 */
static struct push_req *encode_ingest_one(const struct push_period *p, size_t i)
{
	const struct prof_series *s = &p->set->series[i];
	char key[4096], v[1100], target[8192 + 256];
	const char *service = "unknown";
	size_t o = 0, klen = 0;
	struct push_req *r;
	bool first = true;
	uint8_t *body;

	for (size_t l = 0; l < s->nlabels; l++)
		if (!strcmp(s->labels[l].name, "service_name"))
			service = s->labels[l].value;
	app_name(v, sizeof(v), service);
	klen = (size_t)snprintf(key, sizeof(key), "%s{", v);
	for (size_t l = 0; l < s->nlabels && klen < sizeof(key); l++) {
		/* The app is service_name; __name__ comes from the profile's sample types. */
		if (!strcmp(s->labels[l].name, "service_name") || !strcmp(s->labels[l].name, "__name__"))
			continue;
		key_value(v, sizeof(v), s->labels[l].value);
		klen += (size_t)snprintf(key + klen, sizeof(key) - klen, "%s%s=%s", first ? "" : ",",
					 s->labels[l].name, v);
		first = false;
	}
	if (klen + 2 > sizeof(key))
		return NULL;
	strcat(key, "}");
	o = (size_t)snprintf(target, sizeof(target), "/ingest?format=pprof&name=");
	if (!url_put(target, sizeof(target), &o, key))
		return NULL;
	snprintf(target + o, sizeof(target) - o, "&from=%llu&until=%llu&sampleRate=%u&spyName=perfmapctl",
		 (unsigned long long)(p->start_ns / 1000000000ull),
		 (unsigned long long)((p->start_ns + p->duration_ns + 999999999ull) / 1000000000ull),
		 p->rate_hz);
	body = malloc(p->lens[i] ? p->lens[i] : 1);
	if (!body)
		return NULL;
	memcpy(body, p->profiles[i], p->lens[i]);
	r = req_new(target, "application/octet-stream", body, p->lens[i]);
	if (!r)
		free(body);
	return r;
}

int push_encode(enum prof_push_protocol proto, const struct push_period *p, const char *tenant,
		struct push_req ***reqs, size_t *n)
{
	size_t want = proto == PUSH_PYROSCOPE_INGEST ? p->set->n : 1;
	struct push_req **out;

	*reqs = NULL;
	*n = 0;
	if (!p->set->n)
		return 0;
	out = calloc(want, sizeof(*out));
	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < want; i++) {
		switch (proto) {
		case PUSH_PYROSCOPE: out[i] = encode_pyroscope(p); break;
		case PUSH_PYROSCOPE_INGEST: out[i] = encode_ingest_one(p, i); break;
		case PUSH_PARCA: out[i] = encode_parca(p, tenant, true); break;
		case PUSH_PARCA_GRPC: out[i] = encode_parca(p, tenant, false); break;
		}
		if (!out[i]) {
			for (size_t k = 0; k < i; k++)
				push_req_free(out[k]);
			free(out);
			return -ENOMEM;
		}
		out[i]->samples = proto == PUSH_PYROSCOPE_INGEST ? p->set->series[i].count : 0;
		out[i]->series = proto == PUSH_PYROSCOPE_INGEST ? 1 : (uint32_t)p->set->n;
		if (proto != PUSH_PYROSCOPE_INGEST)
			for (size_t k = 0; k < p->set->n; k++)
				out[i]->samples += p->set->series[k].count;
	}
	*reqs = out;
	*n = want;
	return 0;
}

int push_period_requests(enum prof_push_protocol proto, const char *tenant,
			 const struct prof_sample *s, const struct prof_workload *const *wl, size_t n,
			 const struct prof_series_opts *so, const struct prof_pprof_info *info,
			 struct push_req ***reqs, size_t *nreqs, size_t *nseries)
{
	struct prof_series_set set;
	struct push_period pp;
	uint8_t **profiles;
	size_t *lens;
	int err;

	*reqs = NULL;
	*nreqs = *nseries = 0;
	err = prof_series_split(s, wl, n, so, &set);
	if (err)
		return err;
	profiles = calloc(set.n + 1, sizeof(*profiles));
	lens = calloc(set.n + 1, sizeof(*lens));
	err = profiles && lens ? 0 : -ENOMEM;
	for (size_t i = 0; i < set.n && !err; i++)
		err = prof_pprof_encode(set.series[i].samples, set.series[i].n, info, &profiles[i],
					&lens[i]);
	if (!err) {
		pp = (struct push_period){
			.start_ns = info->time_ns, .duration_ns = info->duration_ns,
			.rate_hz = info->interval_ns ? (uint32_t)(1000000000ull / info->interval_ns) : 0,
			.set = &set, .profiles = profiles, .lens = lens,
		};
		err = push_encode(proto, &pp, tenant, reqs, nreqs);
		*nseries = set.n;
	}
	for (size_t i = 0; profiles && i < set.n; i++)
		free(profiles[i]);
	free(profiles);
	free(lens);
	prof_series_set_free(&set);
	return err;
}
