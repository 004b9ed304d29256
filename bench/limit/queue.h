/* A request whose answer waits for its audit line, and the queues that hand such requests from one
 * thread to another. */
#ifndef SVCD_LIMIT_QUEUE_H
#define SVCD_LIMIT_QUEUE_H

#include <pthread.h>

#include "text.h"

struct identity;

/* A request whose answer waits for its line. */
struct job {
  struct job *next;
  int fd;
  struct identity *who;
  /* `{"event":"sign","actor":…` and `,"key":…,"request_id":…`: the line around seq and time. */
  struct buf head, tail;
  /* The whole answer, sent once the line is durable. */
  struct buf answer;
  int failed;
};

void free_job(struct job *j);

/* Jobs handed to one thread: pushed by one or many threads, taken all at once. */
struct queue {
  pthread_mutex_t lock;
  pthread_cond_t more;
  struct job *jobs; /* newest first */
  int closing;
};
#define QUEUE_INIT {.lock = PTHREAD_MUTEX_INITIALIZER, .more = PTHREAD_COND_INITIALIZER}

/* Pushes a list of jobs (oldest first, linked by `next`) under one lock, with one wake-up. */
void queue_push(struct queue *q, struct job *oldest_first);
/* Waits for jobs; all of them, oldest first, or NULL once the queue is closed and empty. */
struct job *queue_take(struct queue *q);
/* No more jobs come: queue_take returns NULL once the queue is empty. */
void queue_close(struct queue *q);

#endif
