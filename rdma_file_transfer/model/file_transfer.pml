/*
 * file_transfer.pml: rdma_file_transfer's protocol (version 2) as a SPIN model, both roles, every
 * interleaving, an honest or a lying peer. rdma_file_transfer/model/check verifies it; chapter 11,
 * "The protocol, proved", reads it.
 *
 *   sender (sender.cpp)                          receiver (receiver.cpp)
 *   step 3: offer ---------------------------->  step 3: check it
 *   step 4: ring?  <----------------------------  SEND the ring (slots)
 *   step 5: chunk k into slot k % SLOTS ------->  step 4: copy the slot out, credit it, hash the copy
 *           (only with the slot's credit) <-----  credit
 *           done (the digest) ----------------->  step 5: compare; keep the file only if they match
 *   step 6: verdict <---------------------------  verdict
 *   step 7: ID -------------------------------->  step 6: the key (or a receipt)
 *           key <-------------------------------
 *   step 8: disconnect ------------------------>  step 7: wait for the disconnect
 *
 * What is abstracted:
 * - A file of CHUNKS chunks into a ring of SLOTS slots. A chunk's bytes are one bit (1: the file's
 *   bytes, 0: other bytes), and a digest is the bits of a whole file side by side: two digests are
 *   equal exactly when the data is (SHA-256 as a perfect hash). The file is all ones: FILE_DIGEST.
 * - The ring is shared memory (ring_data). An RDMA WRITE's bytes may land in the slot any time between
 *   the sender's post and the receiver's completion; the model lands them at the post, the earliest,
 *   which is the worst case for anyone reading the slot.
 * - The channels are RC: FIFO, nothing lost, nothing duplicated, nothing reordered. RC delivers every
 *   message in order or the QP fails (retries exceeded, the peer gone, RDMA_CM_EVENT_DISCONNECTED),
 *   and both sides stop; so loss and duplication are not modelled, and the failure is: `disconnected`,
 *   which may become true at any step (the process network_fails) and which every wait also watches.
 *   A channel holds as many messages as its reader posted receives: SLOTS + 2 to the receiver
 *   (receiver_recv_depth()), one more to the sender (it posts max_window + 2); a message with no
 *   receive for it is RNR, which fails the QP: post() below.
 * - The sender's own WRITE completions (Slot::written: its buffer may be refilled) guard its local
 *   buffer, which the model does not have; -t and --deadline are not modelled: every wait here must
 *   end by a message or the disconnect, so a wait that only -t could end shows up as a deadlock.
 *
 * A lying peer (chosen at the start, one side at a time) does what the wire lets it, in any order,
 * up to LIES times, then goes away; it never reads what it is sent. A lying sender WRITEs a chunk into
 * any slot, credit or not, rewrites a slot with other bytes by a WRITE without immediate (no
 * completion tells the receiver), sends "done" at any time with the file's digest, the digest of what
 * the receiver hashed, or a wrong one. A lying receiver sends credits it does not owe, a verdict
 * "good" at any time with the file's digest (it may know the file, as tests/rogue/rogue_file_peer's
 * --digest does) or another, a key.
 *
 * Properties (assertions; `spin -a`, `./pan` also finds every invalid end state: a side stuck in a
 * wait; `./pan -l` compiled with -DNP finds any run that never ends):
 *   1. No slot is rewritten before its credit: with both sides honest, the sender WRITEs a slot only
 *      once the receiver has copied out the chunk in it, and the receiver never copies a slot that
 *      holds anything but the chunk its completion announced.
 *   2. Nothing is kept or reported verified unless the digests match: the receiver keeps only bytes
 *      whose digest is the one "done" carried, and the bytes it keeps are the bytes it hashed
 *      whatever the sender does; the sender reports success only on a verdict it took after it sent
 *      "done", with its own digest; with an honest receiver, that means the file was kept, whole.
 *   3. Every wait ends, and both sides stop: no invalid end state, no endless run; with both sides
 *      honest and no failure, both succeed.
 *
 * Seeded bugs of version 1, each found as a counterexample (rdma_file_transfer/model/check):
 *   -DRACE_V1        the receiver writes a chunk to disk from the slot, then hashes the slot again:
 *                    a sender that rewrites the slot between the two reads (before its credit) gets
 *                    other bytes kept than the ones the digest covered.
 *   -DEARLY_VERDICT  the sender keeps any message as it comes: a verdict that came before it sent
 *                    "done" is taken as the answer to "done".
 * And a question: -DLIAR_BELIEVED asks whether a lying receiver is ever believed. It is, when it knows
 * the file: what a verdict proves is that the receiver knows the digest, not that it has the bytes.
 */

#define CHUNKS 3
#define SLOTS 2
#define FILE_DIGEST 7      /* the file's digest: CHUNKS chunks of ones, bits 111 */
#define NOT_A_CHUNK 255    /* ring_chunk of a slot a lying sender wrote */
#define LIES 5             /* actions of a lying peer before it goes away */
#define EVERY_SLOT_CREDITED (credited[0] && credited[1])   /* (for SLOTS = 2) */

mtype = { offer, ring, chunk, done, id, credit, verdict, key };

/* A message: its type and two numbers (chunk: the slot; done: CHUNKS, the digest; credit: the slot;
 * verdict: flags, the digest). A WRITE with immediate is a chunk; its bytes are in ring_data. */
chan to_receiver = [SLOTS + 2] of { mtype, byte, byte };
chan to_sender = [SLOTS + 3] of { mtype, byte, byte };  /* the sender posts more (max_window + 2) */

bool disconnected;      /* the QP failed or a side went away: both see RDMA_CM_EVENT_DISCONNECTED */
bool lying_sender, lying_receiver;
bool ring_registered;   /* receiver.cpp deregisters the ring when "done" arrives */
byte ring_data[SLOTS];

/* Ghosts: what the properties are about, not what the programs know. */
byte ring_chunk[SLOTS]; /* which chunk the honest sender wrote into a slot */
bool unread[SLOTS];     /* the slot holds a chunk the receiver has not copied out yet */
bool kept;              /* the receiver kept a file (fsync, rename) */
byte kept_data, announced_digest;
byte hashed_data;       /* the receiver's digest so far (its Sha256 sha) */
bool verdict_came_before_done; /* the verdict the sender holds came before it sent "done" */
bool sender_succeeded, receiver_succeeded;
bool sender_stopped, receiver_stopped, network_failed;

/* Post a SEND or a WRITE with immediate: with no receive posted for it the peer answers RNR until the
 * retries run out and the QP fails. */
inline post(ch, type, x, y) {
    if
    :: nfull(ch) -> ch!type, x, y
    :: full(ch) -> disconnected = true
    fi
}

/* ---- the sender: sender.cpp's run(), credits.hpp's wait_until() ---- */

/* wait_until()'s loop body: take one completion. A credit must return a slot we wrote and the
 * receiver still holds (check_credit()); a message must be owed, and come only once every slot is
 * back (check_answer()). */
inline take_completion() {
    if
    :: to_sender?type, x, y ->
        if
        :: type == credit && x < SLOTS && !credited[x] ->
            printf("L: S. takes the credit of slot %d\n", x);
            credited[x] = true
        :: type == credit && !(x < SLOTS && !credited[x]) ->
            printf("L: S. refuses the credit of slot %d: not one we wrote and it still holds\n", x);
            goto failed
#ifdef EARLY_VERDICT
        :: type != credit ->               /* version 1: any message is kept as it comes */
            printf("L: S. takes a %e\n", type);
            message = type; flags = x; their_digest = y; have_message = true;
            verdict_came_before_done = !done_sent
#else
        :: type != credit && turn_receiver && EVERY_SLOT_CREDITED ->
            printf("L: S. takes a %e\n", type);
            message = type; flags = x; their_digest = y; have_message = true; turn_receiver = false;
            verdict_came_before_done = !done_sent
        :: type != credit && !(turn_receiver && EVERY_SLOT_CREDITED) ->
            printf("L: S. refuses a %e: the receiver owed us no message then\n", type);
            goto failed
#endif
        fi
    :: disconnected -> printf("L: S. sees the connection gone\n"); goto failed
    fi
}

/* expect_message(): wait until a message is in, then take it. */
inline expect_message() {
    do
    :: have_message -> have_message = false; break
    :: else -> take_completion()
    od
}

proctype Sender() {
    mtype type, message;
    byte x, y, flags, their_digest, k, slot, digest;
    bool credited[SLOTS] = true; /* credits.hpp: Slot::credited, every slot free at the start */
    bool turn_receiver, have_message, done_sent;

    /* step 3: SEND the offer; the ring (or a refusal) is owed */
    turn_receiver = true;
    atomic { printf("L: S> offer: %d chunks\n", CHUNKS); post(to_receiver, offer, CHUNKS, 0) };
    /* step 4: expect_message(ring) */
    expect_message();
    if
    :: message == ring -> skip
    :: else -> goto failed
    fi;
    /* step 5: the credit loop */
    for (k : 0 .. CHUNKS - 1) {
        slot = k % SLOTS;
        do  /* wait_until(the credit of slot) */
        :: credited[slot] -> break
        :: else -> take_completion()
        od;
        assert(lying_receiver || !unread[slot]);    /* property 1 */
        atomic {   /* the WRITE's bytes land, its immediate makes the receiver's completion */
            printf("L: S> chunk %d into slot %d\n", k, slot);
            ring_data[slot] = 1; ring_chunk[slot] = k; unread[slot] = true;
            post(to_receiver, chunk, slot, 0)
        };
        credited[slot] = false;
        digest = digest | (1 << k)                  /* sha.update(): the bytes as read */
    };
    turn_receiver = true; done_sent = true;         /* the verdict is owed */
    atomic { printf("L: S> done: digest %d\n", digest); post(to_receiver, done, CHUNKS, digest) };
    /* step 6: the verdict, checked against our digest (check_verdict()) */
    expect_message();
    if
    :: message == verdict && flags == 1 && their_digest == digest -> skip
    :: else -> printf("L: S. the verdict is not good with our digest: fails\n"); goto failed
    fi;
    printf("L: S. believes the verdict: verified\n");
    assert(!verdict_came_before_done);                                  /* property 2 */
    assert(lying_receiver || (kept && kept_data == FILE_DIGEST));      /* property 2 */
#ifdef LIAR_BELIEVED
    assert(!lying_receiver);  /* a question, not a property: is a lying receiver ever believed? */
#endif
    /* step 7: SEND the ID, receive the key */
    turn_receiver = true;
    atomic { printf("L: S> ID\n"); post(to_receiver, id, 0, 0) };
    expect_message();
    if
    :: message == key -> skip
    :: else -> goto failed
    fi;
    sender_succeeded = true;
    printf("L: S. Sample finished successfully\n");
failed:
    /* step 8, or a failure: rdma_disconnect() (a refusal, if any, is not modelled) */
    disconnected = true;
    sender_stopped = true
}

/* ---- the receiver: receiver.cpp's run() ---- */

proctype Receiver() {
    mtype type;
    byte x, y, slot, copy, received, disk;

    /* step 3: next_message(offer), then SEND the ring */
    if
    :: to_receiver?type, x, y
    :: disconnected -> goto failed
    fi;
    if
    :: type == offer && x == CHUNKS -> skip
    :: else -> goto failed
    fi;
    ring_registered = true;
    atomic { printf("L: R> ring: %d slots\n", SLOTS); post(to_sender, ring, SLOTS, 0) };
    /* step 4: the chunk loop */
    do
    :: to_receiver?type, x, y ->
        if
        :: type == chunk && x < SLOTS && received < CHUNKS -> slot = x  /* check_chunk() */
        :: type == done && x == CHUNKS && received == CHUNKS -> break   /* check_done() */
        :: else -> printf("L: R. refuses a %e\n", type); goto failed
        fi;
#ifdef RACE_V1
        /* version 1: write the slot to disk, then hash the slot: two reads of the ring */
        atomic {
            printf("L: R. writes slot %d to disk as chunk %d (bytes %d)\n", slot, received, ring_data[slot]);
            disk = disk | (ring_data[slot] << received)
        };
        assert(lying_sender || ring_chunk[slot] == received);          /* property 1 */
        atomic {
            printf("L: R. hashes slot %d as chunk %d (bytes %d)\n", slot, received, ring_data[slot]);
            hashed_data = hashed_data | (ring_data[slot] << received)
        };
        unread[slot] = false;
#else
        /* the one copy out of the sender's reach; only the copy is hashed and written */
        atomic {
            copy = ring_data[slot];
            printf("L: R. copies slot %d out as chunk %d (bytes %d)\n", slot, received, copy)
        };
        assert(lying_sender || ring_chunk[slot] == received);          /* property 1 */
        unread[slot] = false;
#endif
        atomic { printf("L: R> credit: slot %d\n", slot); post(to_sender, credit, slot, 0) };
#ifndef RACE_V1
        hashed_data = hashed_data | (copy << received);
        disk = disk | (copy << received);
#endif
        received++
    :: disconnected -> printf("L: R. sees the connection gone\n"); goto failed
    od;
    ring_registered = false;  /* ibv_dereg_mr(): nothing of the ring is writable any more */
    /* step 5: compare the digests; keep the file only if they match */
    announced_digest = y;
    if
    :: hashed_data == y ->
        kept = true; kept_data = disk;
        printf("L: R. keeps the file: data %d, digest %d\n", disk, y);
        assert(kept_data == hashed_data && hashed_data == announced_digest);  /* property 2 */
        assert(lying_sender || kept_data == FILE_DIGEST);                     /* property 2 */
        atomic { printf("L: R> verdict: good, digest %d\n", hashed_data); post(to_sender, verdict, 1, hashed_data) }
    :: else ->
        atomic { printf("L: R> verdict: bad, digest %d\n", hashed_data); post(to_sender, verdict, 0, hashed_data) };
        goto failed
    fi;
    /* step 6: next_message(id), SEND the key */
    if
    :: to_receiver?type, x, y
    :: disconnected -> goto failed
    fi;
    if
    :: type == id -> skip
    :: else -> goto failed
    fi;
    atomic { printf("L: R> key\n"); post(to_sender, key, 0, 0) };
    receiver_succeeded = true;
    /* step 7: wait for the sender to disconnect */
    disconnected;
    printf("L: R. Sample finished successfully\n");
failed:
    disconnected = true;
    receiver_stopped = true
}

/* ---- the liars: tests/rogue/rogue_file_peer.cpp's kind of peer ---- */

proctype LyingSender() {
    byte lies, slot, digest;

    atomic { printf("L: S> offer: %d chunks\n", CHUNKS); post(to_receiver, offer, CHUNKS, 0) };
    for (lies : 1 .. LIES) {
        if
        :: ring_registered ->   /* a WRITE with immediate: a chunk, into any slot, credit or not */
            select(slot : 0 .. SLOTS - 1);
            atomic {
                printf("L: S> chunk into slot %d\n", slot);
                ring_data[slot] = 1; ring_chunk[slot] = NOT_A_CHUNK;
                post(to_receiver, chunk, slot, 0)
            }
        :: ring_registered ->   /* a plain WRITE: other bytes in the slot, no completion on the receiver */
            select(slot : 0 .. SLOTS - 1);
            atomic {
                printf("L: S. rewrites slot %d: other bytes, no immediate\n", slot);
                ring_data[slot] = 0; ring_chunk[slot] = NOT_A_CHUNK
            }
        :: if   /* "done", early or not: the file's digest, what the receiver hashed, a wrong one */
            :: digest = FILE_DIGEST
            :: digest = hashed_data
            :: digest = FILE_DIGEST ^ 1
            fi;
            atomic { printf("L: S> done: digest %d\n", digest); post(to_receiver, done, CHUNKS, digest) }
        :: break                  /* enough: it goes away (what it is sent, it never reads) */
        fi
    };
    disconnected = true;
    sender_stopped = true
}

proctype LyingReceiver() {
    byte lies, slot;

    if
    :: to_receiver?_, _, _   /* the offer */
    :: disconnected -> goto gone
    fi;
    atomic { printf("L: R> ring: %d slots\n", SLOTS); post(to_sender, ring, SLOTS, 0) };
    for (lies : 1 .. LIES) {
        if
        :: select(slot : 0 .. SLOTS - 1);   /* a credit, owed or not */
            atomic { printf("L: R> credit: slot %d\n", slot); post(to_sender, credit, slot, 0) }
        :: atomic {   /* a verdict at any time, with the file's digest (it may know the file) */
                printf("L: R> verdict: good, digest %d\n", FILE_DIGEST); post(to_sender, verdict, 1, FILE_DIGEST)
            }
        :: atomic {   /* or "good" with another digest */
                printf("L: R> verdict: good, digest %d\n", FILE_DIGEST ^ 1); post(to_sender, verdict, 1, FILE_DIGEST ^ 1)
            }
        :: atomic { printf("L: R> key\n"); post(to_sender, key, 0, 0) }
        :: break                  /* enough: it goes away (what it is sent, it never reads) */
        fi
    };
gone:
    disconnected = true;
    receiver_stopped = true
}

/* The QP may fail at any step, or never (with a liar, its going away at any step is the same). */
proctype network_fails() {
    if
    :: printf("L: X. the connection fails\n"); network_failed = true; disconnected = true
    :: skip
    fi
}

init {
    atomic {
        if
        :: run Sender(); run Receiver(); run network_fails()
        :: lying_sender = true; printf("L: S. (a lying sender)\n"); run LyingSender(); run Receiver()
        :: lying_receiver = true; printf("L: R. (a lying receiver)\n"); run Sender(); run LyingReceiver()
        fi
    };
    /* property 3: both stop (else pan reports this wait as an invalid end state), and with both
     * sides honest and the connection whole, both succeed */
    sender_stopped && receiver_stopped;
    assert(lying_sender || lying_receiver || network_failed || (sender_succeeded && receiver_succeeded))
}
