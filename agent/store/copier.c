/*
 * Copies off the event loop. A worker takes the oldest waiting copy of a
 * uid no other worker serves (one uid cannot hold every worker), makes it
 * with mapfile.c, and announces it on an eventfd. Before a copy shows at
 * the child's path it passes a gate: the loop may have stopped it (the
 * child exec'd or ended, copier__settle), or the child may have exec'd
 * since it started; either way nothing shows. The loop never waits for a
 * copy, except for one being linked in, which takes microseconds.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "store/copier.h"
#include "lib/log.h"
#include "store/mapfile.h"
#include "lib/subids.h"

#define MAX_THREADS 8
/* Below the event loop's share of the CPU: a copy waits, a fork's small copy does not. */
#define WORKER_NICE 10
#define IOPRIO_CLASS_BE 2
#define IOPRIO_CLASS_SHIFT 13
#define WORKER_IOPRIO ((IOPRIO_CLASS_BE << IOPRIO_CLASS_SHIFT) | 7)  /* best effort, lowest */
#define IOPRIO_WHO_PROCESS 1

enum job_state {
	JOB_QUEUED,    /* waiting for a worker */
	JOB_RUNNING,   /* being made, not shown: it can still be stopped */
	JOB_SHOWING,   /* being linked in, or appended to the child's map */
	JOB_SHOWN,     /* at the path (@err, @res final but the count of entries) */
	JOB_DONE,      /* finished, for copier__drain() */
};

struct copy_job {
	struct copy_job *next;
	struct copier *c;
	uint64_t ticket;
	enum copy_op op;
	struct copy_req rq;
	struct map_info parent_map;
	int parent_fd;             /* opened at submit: an exec of the parent cannot take it away */
	struct copy_result open_res;  /* why it could not be opened */
	enum job_state state;
	bool settled;              /* the loop has its outcome, or stopped it: the gate shows nothing */
	bool told;                 /* the loop has its outcome: not drained */
	bool ready;                /* its parent's map opened: a worker may take it */
	int err;
	struct copy_result res;
};

struct copier {
	struct copier_config cfg;
	pthread_t threads[MAX_THREADS];
	unsigned int nthreads;
	pthread_mutex_t lock;
	pthread_cond_t work;       /* a job queued, or stop */
	pthread_cond_t shown;      /* a job left JOB_SHOWING */
	struct copy_job *jobs;     /* in the order queued: waiting, running and done */
	unsigned int queued;
	int efd;
	bool stop;
};

/*
 * Is a job of @uid's user being made? Then its other jobs wait: one worker
 * per user, a user's subordinate uids counting as the user.
 */
static bool uid_busy(const struct copier *c, uid_t uid)
{
	const struct copy_job *j;
	uid_t owner = subids_owner(uid);

	for (j = c->jobs; j; j = j->next)
		if (subids_owner(j->rq.uid) == owner &&
		    (j->state == JOB_RUNNING || j->state == JOB_SHOWING))
			return true;
	return false;
}

static struct copy_job *next_job(struct copier *c)
{
	struct copy_job *j;

	for (j = c->jobs; j; j = j->next)
		if (j->state == JOB_QUEUED && j->ready && !uid_busy(c, j->rq.uid))
			return j;
	return NULL;
}

/* Gate: the copy is about to show at the child's path. */
static int gate_enter(void *arg)
{
	struct copy_job *j = arg;
	struct copier *c = j->c;
	int err = 0;

	pthread_mutex_lock(&c->lock);
	/* The kernel's record: an exec since the fork means the parent's names are not the new image's. */
	if (j->settled || c->stop ||
	    (c->cfg.execd_since && c->cfg.execd_since(c->cfg.ctx, j->rq.child, j->rq.child_start_ns)))
		err = -ECANCELED;
	else
		j->state = JOB_SHOWING;
	pthread_mutex_unlock(&c->lock);
	return err;
}

static void gate_leave(void *arg, int err, const struct copy_result *res)
{
	struct copy_job *j = arg;
	struct copier *c = j->c;

	pthread_mutex_lock(&c->lock);
	j->err = err;
	j->res = *res;
	j->res.entries = -1;  /* not counted yet */
	j->state = JOB_SHOWN;
	pthread_cond_broadcast(&c->shown);
	pthread_mutex_unlock(&c->lock);
}

/* Between chunks: a copy settled (stopped) or an agent stopping writes no more. */
static bool gate_stopped(void *arg)
{
	struct copy_job *j = arg;
	bool stopped;

	pthread_mutex_lock(&j->c->lock);
	stopped = j->settled || j->c->stop;
	pthread_mutex_unlock(&j->c->lock);
	return stopped;
}

static void make_copy(struct copier *c, struct copy_job *j, struct copy_result *res)
{
	const struct copy_gate gate = { gate_enter, gate_leave, gate_stopped, j };
	int err;

	j->rq.parent_map = &j->parent_map;
	if (j->parent_fd < 0) {
		err = j->parent_fd;
		*res = j->open_res;
	} else if (j->op == COPY_OP_CREATE) {
		err = mapfile_create(c->cfg.map_dir_fd, j->parent_fd, &j->rq, c->cfg.max_map_bytes,
				     &gate, res);
	} else {
		err = mapfile_append(c->cfg.map_dir_fd, j->parent_fd, &j->rq, c->cfg.max_map_bytes,
				     &gate, res);
	}
	pthread_mutex_lock(&c->lock);
	j->err = err;
	j->res = *res;
	j->state = JOB_DONE;
	pthread_cond_broadcast(&c->shown);
	pthread_mutex_unlock(&c->lock);
}

/* The calling thread only: Linux keeps a nice value and an I/O priority per thread. */
static void worker_lower_priority(void)
{
	pid_t tid = (pid_t)syscall(SYS_gettid);

	if (setpriority(PRIO_PROCESS, (id_t)tid, WORKER_NICE))
		pr_debug("copier: cannot lower the workers' CPU priority: %m");
	if (syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, tid, WORKER_IOPRIO))
		pr_debug("copier: cannot lower the workers' I/O priority: %m");
}

static void *worker_main(void *arg)
{
	struct copier *c = arg;
	const uint64_t one = 1;
	struct copy_result res;
	struct copy_job *j;

	worker_lower_priority();
	pthread_mutex_lock(&c->lock);
	while (!c->stop) {
		j = next_job(c);
		if (!j) {
			pthread_cond_wait(&c->work, &c->lock);
			continue;
		}
		j->state = JOB_RUNNING;
		c->queued--;
		pthread_mutex_unlock(&c->lock);

		res = (struct copy_result){ 0 };
		make_copy(c, j, &res);
		if (write(c->efd, &one, sizeof(one)) != sizeof(one))
			pr_warn("copier: cannot wake the event loop: %m");

		pthread_mutex_lock(&c->lock);
		/* Its uid is free: a job of it may wait. */
		pthread_cond_broadcast(&c->work);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

static void job_free(struct copy_job *j)
{
	if (j->parent_fd >= 0)
		close(j->parent_fd);
	free(j);
}

struct copier *copier__open(const struct copier_config *cfg)
{
	struct copier *c = calloc(1, sizeof(*c));
	unsigned int i;

	if (!c)
		return NULL;
	c->cfg = *cfg;
	c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->work, NULL);
	pthread_cond_init(&c->shown, NULL);
	if (c->efd < 0)
		goto free_copier;
	for (i = 0; i < cfg->threads && i < MAX_THREADS; i++) {
		if (pthread_create(&c->threads[i], NULL, worker_main, c))
			goto free_copier;
		c->nthreads++;
	}
	return c;

free_copier:
	copier__free(c);
	return NULL;
}

void copier__free(struct copier *c)
{
	struct copy_job *j;
	unsigned int i;

	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->stop = true;
	pthread_cond_broadcast(&c->work);
	pthread_mutex_unlock(&c->lock);
	for (i = 0; i < c->nthreads; i++)
		pthread_join(c->threads[i], NULL);
	while ((j = c->jobs)) {
		c->jobs = j->next;
		job_free(j);
	}
	if (c->efd >= 0)
		close(c->efd);
	pthread_cond_destroy(&c->shown);
	pthread_cond_destroy(&c->work);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

int copier__fd(const struct copier *c)
{
	return c->efd;
}

/* Queued for @uid's user: a user's subordinate uids count as the user. */
static unsigned int queued_of(const struct copier *c, uid_t uid)
{
	const struct copy_job *j;
	unsigned int n = 0;
	uid_t owner = subids_owner(uid);

	for (j = c->jobs; j; j = j->next)
		n += subids_owner(j->rq.uid) == owner && j->state == JOB_QUEUED;
	return n;
}

int copier__submit(struct copier *c, const struct copy_req *rq, enum copy_op op, uint64_t ticket)
{
	struct copy_job *j, **tail;
	int err = 0, fd;

	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->c = c;
	j->ticket = ticket;
	j->op = op;
	j->rq = *rq;
	j->parent_map = *rq->parent_map;
	j->rq.parent_map = &j->parent_map;
	j->parent_fd = -1;
	pthread_mutex_lock(&c->lock);
	/* The uid's share spent is its own doing (-EAGAIN); the whole queue full is everyone's (-EBUSY). */
	if (c->queued >= c->cfg.queue_max) {
		err = -EBUSY;
	} else if (queued_of(c, rq->uid) >= c->cfg.queue_per_uid) {
		err = -EAGAIN;
	} else {
		for (tail = &c->jobs; *tail; tail = &(*tail)->next)
			;
		*tail = j;
		c->queued++;
	}
	pthread_mutex_unlock(&c->lock);
	if (err) {
		free(j);
		return err;
	}
	/*
	 * Opened now, in the loop's order of events: by the time a worker
	 * takes it, the parent may have exec'd and its map be archived.
	 * Queued first, so that a full queue costs no open.
	 */
	fd = mapfile_open_parent(c->cfg.map_dir_fd, rq, c->cfg.max_map_bytes, &j->open_res);
	pthread_mutex_lock(&c->lock);
	j->parent_fd = fd;
	j->ready = true;
	pthread_cond_signal(&c->work);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

static struct copy_job **find_job(struct copier *c, uint64_t ticket)
{
	struct copy_job **pp;

	for (pp = &c->jobs; *pp; pp = &(*pp)->next)
		if ((*pp)->ticket == ticket)
			return pp;
	return NULL;
}

int copier__settle(struct copier *c, uint64_t ticket, struct copy_result *res)
{
	struct copy_job **pp, *j;
	int err;

	pthread_mutex_lock(&c->lock);
	pp = find_job(c, ticket);
	if (!pp) {
		err = -ECANCELED;  /* not ours: nothing of it will show */
		goto unlock;
	}
	j = *pp;
	/* A link takes microseconds: its outcome is worth the wait. An append's write is not. */
	while (j->state == JOB_SHOWING && j->op == COPY_OP_CREATE)
		pthread_cond_wait(&c->shown, &c->lock);
	switch (j->state) {
	case JOB_QUEUED:
		*pp = j->next;
		c->queued--;
		job_free(j);
		err = -ECANCELED;
		break;
	case JOB_RUNNING:
		/*
		 * The gate stops it, but its reads and writes so far were made:
		 * drained when done, so that they are charged (-EINPROGRESS).
		 */
		j->settled = true;
		err = -EINPROGRESS;
		break;
	case JOB_SHOWING:
		err = -EINPROGRESS;  /* drained when done */
		break;
	case JOB_SHOWN:
	case JOB_DONE:
	default:
		j->settled = j->told = true;
		*res = j->res;
		err = j->err;
		break;
	}
unlock:
	pthread_mutex_unlock(&c->lock);
	return err;
}

void copier__drain(struct copier *c, copier_done_fn fn, void *ctx)
{
	struct copy_job **pp, *j, *done = NULL, **tail = &done;
	uint64_t n;

	if (read(c->efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		pr_warn("copier: eventfd: %m");
	pthread_mutex_lock(&c->lock);
	for (pp = &c->jobs; (j = *pp);) {
		if (j->state != JOB_DONE) {
			pp = &j->next;
			continue;
		}
		*pp = j->next;
		j->next = NULL;
		*tail = j;
		tail = &j->next;
	}
	pthread_mutex_unlock(&c->lock);
	while ((j = done)) {
		done = j->next;
		if (!j->told)
			fn(ctx, j->rq.child, j->ticket, j->op, j->err, &j->res);
		job_free(j);
	}
}
