// Parallel scaling probe: N processes, each counting loop iterations for S seconds.
// mode p: private work (a register loop with a volatile local); mode a: an atomic add on one shared line;
// mode s: a plain store+load on a private line in shared memory (no sharing between processes).
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <unistd.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/wait.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  char mode=argv[1][0]; int n=atoi(argv[2]); double secs=atof(argv[3]);
  uint64_t *shm=mmap(0,4096*64,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0);
  volatile uint64_t *res=shm+256;
  for(int i=0;i<n;i++) if(fork()==0){
    uint64_t it=0; volatile uint64_t x=0; double end=now()+secs;
    while(1){
      for(int k=0;k<10000;k++){
        if(mode=='p') x+=k;
        else if(mode=='a') __atomic_fetch_add(&shm[0],1,__ATOMIC_SEQ_CST);
        else { shm[8*(i+1)+512]+=1; }
      }
      it+=10000; if(now()>=end) break;
    }
    res[8*i]=it; _exit(0);
  }
  while(wait(0)>0);
  uint64_t tot=0; for(int i=0;i<n;i++) tot+=res[8*i];
  printf("mode %c procs %d: %.1f M iterations/s total, %.1f per process\n",mode,n,tot/secs/1e6,tot/secs/1e6/n);
  return 0;
}
