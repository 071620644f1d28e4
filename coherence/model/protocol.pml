/* Loom's coherence protocol (docs/coherence.md) as a Promela model for spin.
 *
 * NP processes, NB blocks of NW words, NL locks; word l of every block is protected by lock l,
 * so the programs are data-race free while two processes may write one block at once (the
 * multiple-writer merge). Process 0 runs NOPS critical sections, the others NOPS_OTHERS
 * (default NOPS): take a lock (chosen non-deterministically), read and perhaps write its word
 * of each block, release.
 *
 * Modelled as the code does it (file and step numbers of docs/coherence.md):
 *  - read miss (read_path.cpp): aim at the hint (a write notice's last releaser: fast read),
 *    READ the block word by word (torn reads are possible), READ the directory entry (word0,
 *    then wts), validate, extend the lease with a CAS; revalidation without data when the copy
 *    holds the version aimed at;
 *  - release (release_path.cpp): lock the entry by CAS on the last view (steps 1-2: unchanged
 *    means the master is our twin, and so does an entry whose home is us or whose wts is our
 *    copy's: only leases moved), READ the master from the home into our own public copy,
 *    merge the diff (step 3), timestamps (4), invalidate the sharers (5, directory policy),
 *    WRITE wts then unlock by CAS with this process as the new home (6), record a notice (7);
 *  - acquire (acquire.cpp): the lock's notices merged into a bounded buffer that folds (NCAP),
 *    notices newer than a copy drop it (step 1), the lease bound (2), invalidation flags (3);
 *  - locks carry the releaser's whole notice buffer; the queue of the MCS lock is abstracted to
 *    one atomic test-and-set (its own correctness is not modelled here).
 * Each fabric request is one atomic step, except the READ of a block by a reader, which takes
 * its words one at a time (a reader may see a torn version and must reject it); local work is
 * a d_step.
 *
 * Checked: every read returns the value of the last write to that word (the last release
 * under its lock happened before the read's acquire): no stale read; at the end the master of
 * every block, at its home, holds every word's last write: no lost write; and no invalid end
 * state: no deadlock. -DDIR selects the directory policy (sharers and invalidation flags, no
 * leases, no notices); otherwise the floating-home timestamp policy (notices and leases).
 * -DMUTANT switches off notice invalidation (acquire step 1; with -DDIR: the invalidation
 * flags): spin must then find a stale read. -DMUTANT_UNCHANGED takes every changed entry at a
 * release for one only leases changed (release step 2): spin must find a lost write. Run by
 * scripts/check-model.sh.
 */

#ifndef NP
#define NP 3
#endif
#ifndef NOPS
#define NOPS 2
#endif
#ifndef NOPS_OTHERS     /* critical sections of processes 1..NP-1 (3 processes in reach: fewer) */
#define NOPS_OTHERS NOPS
#endif
#define NB 2
#define NW 2
#define NL 2
#define LEASE 4
#define NCAP 1          /* notice buffer capacity: a second notice folds the first */
#define NSLOT (NCAP + 1)
#define NONE 255        /* unknown version / no lease */

#define INVALID 0
#define CLEAN 1
#define DIRTY 2

#define PB(p, b) ((p) * NB + (b))
#define PBW(p, b, w) (((p) * NB + (b)) * NW + (w))
#define MAX(a, b) ((a) > (b) -> (a) : (b))

/* ---- registered memory, reached through the fabric ---- */
byte pub[NP * NB * NW];              /* public copy of each block at each process */
bool dW[NB];                         /* directory entry at the manager: word0 = W | home | rts */
byte dHome[NB];
byte dRts[NB];
byte dWts[NB];                       /* ... and wts */
bool sharer[NB * NP];                /* directory policy: sharer bytes */
bool iflag[NP * NB];                 /* directory policy: invalidation flags at each process */
byte icount[NP];                     /* ... and the counter a releaser FETCH_ADDs */
bool held[NL];                       /* the lock (MCS queue abstracted) */
byte ls_n[NL];                       /* the notices stored with the lock */
byte ls_min[NL];
byte ls_b[NL * NCAP];
byte ls_w[NL * NCAP];
byte ls_t[NL * NCAP];

/* ---- each process's cache, ordinary memory: locals of Process (so spin's partial-order
 * reduction knows that only the fabric requests interleave) ---- */

/* ---- ghosts ---- */
byte gval[NB * NW];                  /* the last value written to each word */
byte next_val;
byte finished;

/* NoticeBuffer::fold: drop the oldest until NCAP - NCAP/4 are left, raising min_wts to the
 * largest dropped wts; then drop what the new bound covers. */
inline fold() {
  do
  :: nb_n > NCAP - NCAP / 4 ->
     k = 0; j = 1;
     do
     :: j < nb_n -> if :: nb_t[j] < nb_t[k] -> k = j :: else -> skip fi; j++
     :: else -> break
     od;
     nb_min = MAX(nb_min, nb_t[k]);
     nb_n--;
     nb_b[k] = nb_b[nb_n];
     nb_w[k] = nb_w[nb_n];
     nb_t[k] = nb_t[nb_n]
  :: else -> break
  od;
  j = 0;
  do
  :: j < nb_n && nb_t[j] <= nb_min ->
     nb_n--;
     nb_b[j] = nb_b[nb_n];
     nb_w[j] = nb_w[nb_n];
     nb_t[j] = nb_t[nb_n]
  :: j < nb_n && nb_t[j] > nb_min -> j++
  :: else -> break
  od
}

/* NoticeBuffer::add: the newest per block; nothing at or below min_wts; fold on overflow. */
inline notice_add(nbk, nwr, nts) {
  i = 0;
  found = false;
  do
  :: i < nb_n && nb_b[i] == nbk ->
     found = true;
     if
     :: nts > nb_t[i] -> nb_w[i] = nwr; nb_t[i] = nts
     :: else -> skip
     fi;
     break
  :: i < nb_n && nb_b[i] != nbk -> i++
  :: else -> break
  od;
  if
  :: !found && nts > nb_min ->
     nb_b[nb_n] = nbk;
     nb_w[nb_n] = nwr;
     nb_t[nb_n] = nts;
     nb_n++;
     if
     :: nb_n > NCAP -> fold()
     :: else -> skip
     fi
  :: else -> skip
  fi
}

inline drop(db) {
  assert(st[db] != DIRTY);  /* every release publishes all dirty blocks */
  st[db] = INVALID
}

/* Acquire, after merging the lock's notices into our buffer, whose min_wts is then inmin. */
inline acquire() {
  d_step {
#if !defined(DIR) && !defined(MUTANT)
    /* step 1: a notice newer than the copy drops it; the hint names the last releaser */
    i = 0;
    do
    :: i < nb_n ->
       b2 = nb_b[i];
       if
       :: nb_t[i] > known[b2] ->
          known[b2] = nb_t[i];
          if
          :: dwts[b2] < nb_t[i] ->
             if
             :: nb_t[i] > hw[b2] || hw[b2] == NONE ->
                hh[b2] = nb_w[i];
                hw[b2] = nb_t[i]
             :: else -> skip
             fi;
             drop(b2)
          :: else -> skip
          fi
       :: else -> skip
       fi;
       i++
    :: else -> break
    od;
#endif
#ifndef DIR
    /* step 2: folded notices raised the bound: every copy whose lease ended before it goes */
    if
    :: inmin > acq ->
       acq = inmin;
       b2 = 0;
       do
       :: b2 < NB ->
          if
          :: st[b2] != INVALID && crts[b2] < acq -> drop(b2)
          :: else -> skip
          fi;
          b2++
       :: else -> break
       od
    :: else -> skip
    fi;
#endif
#if defined(DIR) && !defined(MUTANT)
    /* step 3: invalidation flags (exchanged to 0) */
    if
    :: icount[p] != iseen ->
       iseen = icount[p];
       b2 = 0;
       do
       :: b2 < NB ->
          if
          :: iflag[PB(p, b2)] -> iflag[PB(p, b2)] = false; hw[b2] = NONE; drop(b2)
          :: else -> skip
          fi;
          b2++
       :: else -> break
       od
    :: else -> skip
    fi;
#endif
    skip
  }
}

/* Read miss / revalidation: Invalid -> Clean. */
inline read_miss() {
  aim_h = hh[b];
  aim_w = hw[b];
  have = (dwts[b] == aim_w);
  do
  :: true ->
#ifdef DIR
     sharer[b * NP + p] = true;                     /* our sharer byte, before validating */
#endif
     if
     :: !have ->                                     /* READ the public copy, word by word */
        stg0 = pub[PBW(aim_h, b, 0)];
        stg1 = pub[PBW(aim_h, b, 1)]
     :: else -> skip
     fi;
     atomic { rW = dW[b]; rHome = dHome[b]; rRts = dRts[b] }  /* READ the entry: word0 ... */
     rWts = dWts[b];                                           /* ... then wts */
     if
     :: rW || rHome != aim_h || rWts != aim_w ->     /* moved on, or being published: aim again */
        aim_h = rHome; aim_w = rWts; have = false;
        if
        :: rW -> !dW[b]                              /* back off while W is set */
        :: else -> skip
        fi
     :: else ->
#ifndef DIR
        want = MAX(rWts, acq) + LEASE;
        if
        :: rRts < want - LEASE / 2 ->                /* extend the lease: CAS word0 */
           atomic {
             if
             :: !dW[b] && dHome[b] == rHome && dRts[b] == rRts -> dRts[b] = want; rRts = want; ok = true
             :: else -> ok = false
             fi
           }
        :: else -> ok = true
        fi;
        if
        :: ok -> break
        :: else -> skip                              /* validate again */
        fi
#else
        break
#endif
     fi
  od;
  skip;  /* a jump target outside the d_step */
  d_step {
    if
    :: !have -> dat[(b) * NW + 0] = stg0; dat[(b) * NW + 1] = stg1
    :: else -> skip
    fi;
    dwts[b] = aim_w;
    hh[b] = rHome;
    hw[b] = aim_w;
#ifdef DIR
    crts[b] = NONE;
#else
    crts[b] = rRts;
#endif
    vhome[b] = rHome;
    vrts[b] = rRts;
    st[b] = CLEAN
  }
}

/* Release of a dirty block: Dirty -> Clean; this process becomes the home. */
inline release_block() {
  /* step 1: lock the entry, first expecting our last view of it */
  unchanged = true;
  gHome = vhome[b];
  gRts = vrts[b];
  do
  :: atomic {
       if
       :: !dW[b] && dHome[b] == gHome && dRts[b] == gRts -> dW[b] = true; ok = true
       :: else -> unchanged = false; rW = dW[b]; gHome = dHome[b]; gRts = dRts[b]; ok = false
       fi
     };
     if
     :: ok -> break
     :: !ok && rW -> !dW[b]                          /* back off while W is set */
     :: !ok && !rW -> skip
     fi
  od;
  /* step 2: an entry changed only by lease extensions still holds our copy's version (its wts
     names it); the home still being us says the same without reading it (release_path.cpp,
     only_lease_moved) */
  if
#ifndef MUTANT_UNCHANGED
  :: !unchanged && (gHome == p || dWts[b] == dwts[b]) -> unchanged = true
#else
  :: !unchanged -> unchanged = true                  /* any change taken for a lease's */
#endif
  :: else -> skip
  fi;
  /* steps 2-3: the new master in our own public copy */
  if
  :: unchanged ->                                    /* the master is our twin */
     atomic { pub[PBW(p, b, 0)] = dat[(b) * NW + 0]; pub[PBW(p, b, 1)] = dat[(b) * NW + 1] }
  :: else ->
     if
     :: gHome != p ->                                /* READ the master into our public copy */
        atomic { pub[PBW(p, b, 0)] = pub[PBW(gHome, b, 0)]; pub[PBW(p, b, 1)] = pub[PBW(gHome, b, 1)] }
     :: else -> skip
     fi;
     skip;
     d_step {                                        /* merge_diff */
       w = 0;
       do
       :: w < NW ->
          if
          :: dat[(b) * NW + w] != twin[(b) * NW + w] -> pub[PBW(p, b, w)] = dat[(b) * NW + w]
          :: else -> dat[(b) * NW + w] = pub[PBW(p, b, w)]
          fi;
          w++
       :: else -> break
       od
     }
  fi;
  /* step 4 */
  wtsNew = MAX(gRts + 1, acq);
  assert(wtsNew < 200);
#ifdef DIR
  rtsNew = wtsNew;
  /* step 5: READ the sharers, flag and count at every other one, then the sharers are {us} */
  d_step { s = 0; do :: s < NP -> sh[s] = sharer[b * NP + s]; s++ :: else -> break od }
  s = 0;
  do
  :: s < NP ->
     if
     :: s != p && sh[s] -> iflag[PB(s, b)] = true; icount[s]++
     :: else -> skip
     fi;
     s++
  :: else -> break
  od;
  skip;  /* a jump target outside the d_step */
  d_step { s = 0; do :: s < NP -> sharer[b * NP + s] = (s == p); s++ :: else -> break od }
#else
  rtsNew = wtsNew + LEASE;
#endif
  /* step 6: WRITE wts, then unlock by CAS naming us the home */
  dWts[b] = wtsNew;
  atomic {
    assert(dW[b] && dHome[b] == gHome && dRts[b] == gRts);
    dW[b] = false; dHome[b] = p; dRts[b] = rtsNew
  };
  /* step 7 */
  d_step {
    st[b] = CLEAN;
    dwts[b] = wtsNew;
    hh[b] = p;
    hw[b] = wtsNew;
#ifdef DIR
    crts[b] = NONE;
#else
    crts[b] = rtsNew;
#endif
    vhome[b] = p;
    vrts[b] = rtsNew;
    known[b] = MAX(known[b], wtsNew);
#ifndef DIR
    notice_add(b, p, wtsNew);
#endif
    skip
  }
}

proctype Process(byte p) {
  byte op, l, b, w, s, i, j, k, b2, mi, act;
  byte aim_h, aim_w, stg0, stg1, rHome, rRts, rWts, want, gHome, gRts, wtsNew, rtsNew, inmin;
  bool have, rW, ok, unchanged, found;
  bool sh[NP];
  /* the cache: per block state, private copy, twin, data_wts, lease, hint, last view of word0,
   * known_wts; acq_ts; the notice buffer */
  byte st[NB], dat[NB * NW], twin[NB * NW], dwts[NB], crts[NB], hh[NB], hw[NB], vhome[NB], vrts[NB], known[NB];
  byte acq, iseen, nb_n, nb_min;
  byte nb_b[NSLOT], nb_w[NSLOT], nb_t[NSLOT];
  b = 0;
  do
  :: b < NB -> hh[b] = b % NP; vhome[b] = b % NP; b++     /* version 0 is at the block's manager */
  :: else -> break
  od;
  op = 0;
  do
  :: op < (p == 0 -> NOPS : NOPS_OTHERS) ->
     if
#ifdef FIRST_LOCK_FIXED
     :: op == 0 -> l = p % NL                       /* (the CI set: the first lock is the rank's) */
     :: op > 0 -> l = 0
     :: op > 0 -> l = 1
#else
     :: l = 0
     :: l = 1
#endif
     fi;
     /* lock: take it, READ its notices, merge them, acquire */
     atomic { !held[l] -> held[l] = true };
     d_step {
       nb_min = MAX(nb_min, ls_min[l]);
       mi = 0;
       do
       :: mi < ls_n[l] -> notice_add(ls_b[l * NCAP + mi], ls_w[l * NCAP + mi], ls_t[l * NCAP + mi]); mi++
       :: else -> break
       od;
       inmin = nb_min          /* the bound after the merge, folds included (barrier.cpp, acquire_wire) */
     }
     acquire();
     /* the critical section: word l of each block read, or read and written (act; with
      * -DUNTOUCHED also left alone; a choice made first, so that the else of a nested if means
      * what it says) */
     b = 0;
     do
     :: b < NB ->
        if
        :: act = 1
        :: act = 2
#ifdef UNTOUCHED
        :: act = 0                                   /* (the long check: blocks left alone too) */
#endif
        fi;
        if
        :: act > 0 ->
           if
           :: st[b] == INVALID -> read_miss()
           :: else -> skip
           fi;
           assert(dat[(b) * NW + l] == gval[b * NW + l]);   /* no stale read */
           if
           :: act == 2 ->
              d_step {
                if
                :: st[b] == CLEAN ->                  /* first write: the twin */
                   twin[(b) * NW + 0] = dat[(b) * NW + 0];
                   twin[(b) * NW + 1] = dat[(b) * NW + 1];
                   st[b] = DIRTY
                :: else -> skip
                fi;
                next_val++;
                dat[(b) * NW + l] = next_val;
                gval[b * NW + l] = next_val
              }
           :: else -> skip
           fi
        :: else -> skip
        fi;
        b++
     :: else -> break
     od;
     /* unlock: release the dirty blocks, WRITE our notices into the lock, then free it */
     b = 0;
     do
     :: b < NB ->
        if
        :: st[b] == DIRTY -> release_block()
        :: else -> skip
        fi;
        b++
     :: else -> break
     od;
     skip;  /* a jump target outside the d_step */
     d_step {
       ls_n[l] = nb_n;
       ls_min[l] = nb_min;
       j = 0;
       do
       :: j < nb_n ->
          ls_b[l * NCAP + j] = nb_b[j];
          ls_w[l * NCAP + j] = nb_w[j];
          ls_t[l * NCAP + j] = nb_t[j];
          j++
       :: else -> break
       od
     }
     held[l] = false;
     op++
  :: else -> break
  od;
  finished++
}

init {
  byte p, b;
  atomic {
    /* every block starts as version 0 (all zeros) at its manager, which is its home */
    b = 0;
    do
    :: b < NB ->
       dHome[b] = b % NP;
       b++
    :: else -> break
    od;
    p = 0;
    do
    :: p < NP -> run Process(p); p++
    :: else -> break
    od
  }
  /* no lost write: when every process is done, each block's master holds every last write */
  finished == NP;
  b = 0;
  do
  :: b < NB ->
     assert(!dW[b]);
     assert(pub[PBW(dHome[b], b, 0)] == gval[b * NW + 0]);
     assert(pub[PBW(dHome[b], b, 1)] == gval[b * NW + 1]);
     b++
  :: else -> break
  od
}
