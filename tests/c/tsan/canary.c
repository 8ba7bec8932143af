/* The ThreadSanitizer step really checks: two threads writing one int without a lock must be
 * reported (the test expects this program to fail). */
#include <pthread.h>
#include <stdio.h>

static int shared;

static void *writer(void *arg) {
  (void)arg;
  for (int i = 0; i < 1000; i++) shared++;
  return NULL;
}

int main(void) {
  pthread_t a, b;
  pthread_create(&a, NULL, writer, NULL);
  pthread_create(&b, NULL, writer, NULL);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  printf("%d\n", shared);
  return 0;
}
