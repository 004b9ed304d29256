/* The queues between the workers, the audit writer and the answering thread. */
#include "queue.h"

#include <stdlib.h>

void free_job(struct job *j) {
  free(j->head.p);
  free(j->tail.p);
  free(j->answer.p);
  free(j);
}

/* Pushes a list of jobs (oldest first, linked by `next`) under one lock, with one wake-up. */
void queue_push(struct queue *q, struct job *oldest_first) {
  pthread_mutex_lock(&q->lock);
  for (struct job *j = oldest_first, *next; j; j = next) {
    next = j->next;
    j->next = q->jobs;
    q->jobs = j;
  }
  pthread_cond_signal(&q->more);
  pthread_mutex_unlock(&q->lock);
}

/* Waits for jobs; all of them, oldest first, or NULL once the queue is closed and empty. */
struct job *queue_take(struct queue *q) {
  pthread_mutex_lock(&q->lock);
  while (!q->jobs && !q->closing) pthread_cond_wait(&q->more, &q->lock);
  struct job *newest = q->jobs, *oldest_first = NULL;
  q->jobs = NULL;
  pthread_mutex_unlock(&q->lock);
  while (newest) {
    struct job *next = newest->next;
    newest->next = oldest_first;
    oldest_first = newest;
    newest = next;
  }
  return oldest_first;
}

void queue_close(struct queue *q) {
  pthread_mutex_lock(&q->lock);
  q->closing = 1;
  pthread_cond_signal(&q->more);
  pthread_mutex_unlock(&q->lock);
}
