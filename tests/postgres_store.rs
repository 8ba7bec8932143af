//! The PostgreSQL session store against a real server (`scripts/postgres.sh`; each test is
//! skipped, saying why, where PostgreSQL cannot run).
#![cfg(feature = "postgres")]

mod pg_support;

use std::sync::Arc;
use std::time::Duration;

use agentao::session_store::postgres::PostgresStore;
use agentao::session_store::{ListQuery, SessionCommit, SessionStore, StoreError};

fn commit(id: &str, tenant: &str, owner: &str, continues: u64, doc: &str) -> SessionCommit {
    SessionCommit {
        session_id: id.to_owned(),
        tenant: tenant.to_owned(),
        owner: owner.to_owned(),
        continues,
        document: doc.to_owned(),
    }
}

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trip_keeps_the_document_byte_for_byte() {
    let Some(url) = pg_support::server("pg") else {
        return;
    };
    let store = PostgresStore::connect(&url).unwrap();
    let id = unique("rt");
    // Key order, spacing and escapes survive: the store never parses the document.
    let doc1 = r#"{"z":1, "a":"\u00e9\n", "dup":1, "dup":2}"#;
    assert_eq!(store.load(&id).await.unwrap(), None);
    assert_eq!(
        store.commit(&commit(&id, "t", "o", 0, doc1)).await.unwrap(),
        1
    );
    let got = store.load(&id).await.unwrap().unwrap();
    assert_eq!((got.version, got.document.as_str()), (1, doc1));
    assert_eq!((got.tenant.as_str(), got.owner.as_str()), ("t", "o"));
    let now = chrono::Utc::now().timestamp_millis();
    assert!(
        (now - got.updated_at_ms).abs() < 60_000,
        "{}",
        got.updated_at_ms
    );
    assert_eq!(
        store
            .commit(&commit(&id, "t", "o", 1, "{\"v\":2}"))
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        store.load(&id).await.unwrap().unwrap().document,
        "{\"v\":2}"
    );
    // A commit that continues a version never stored is a conflict naming the stored one.
    assert_eq!(
        store.commit(&commit(&id, "t", "o", 7, "{}")).await,
        Err(StoreError::Conflict {
            session_id: id.clone(),
            continues: 7,
            stored: 2
        })
    );
    assert!(store.delete(&id).await.unwrap());
    assert!(!store.delete(&id).await.unwrap());
    assert_eq!(store.load(&id).await.unwrap(), None);
    assert!(matches!(store.load("").await, Err(StoreError::Invalid(_))));
    assert!(matches!(
        store.commit(&commit(&id, "t", "o", 0, "a\0b")).await,
        Err(StoreError::Invalid(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_continuing_one_version_one_wins_one_conflicts() {
    let Some(url) = pg_support::server("pg") else {
        return;
    };
    // Two stores, two connections: as two processes would.
    let a = Arc::new(PostgresStore::connect(&url).unwrap());
    let b = Arc::new(PostgresStore::connect(&url).unwrap());
    let id = unique("race");
    for continues in 0..20u64 {
        let (ca, cb) = (
            commit(&id, "t", "o", continues, &format!("a{continues}")),
            commit(&id, "t", "o", continues, &format!("b{continues}")),
        );
        let (sa, sb) = (a.clone(), b.clone());
        let ta = tokio::spawn(async move { sa.commit(&ca).await });
        let tb = tokio::spawn(async move { sb.commit(&cb).await });
        let (ra, rb) = (ta.await.unwrap(), tb.await.unwrap());
        let (won, lost, winner) = match (&ra, &rb) {
            (Ok(_), Err(_)) => (ra.clone(), rb.clone(), 'a'),
            (Err(_), Ok(_)) => (rb.clone(), ra.clone(), 'b'),
            other => panic!("version {continues}: exactly one commit must win: {other:?}"),
        };
        assert_eq!(won, Ok(continues + 1));
        assert_eq!(
            lost,
            Err(StoreError::Conflict {
                session_id: id.clone(),
                continues,
                stored: continues + 1
            })
        );
        // The winner's document is the one stored: the loser overwrote nothing.
        let stored = a.load(&id).await.unwrap().unwrap();
        assert_eq!(stored.document, format!("{winner}{continues}"));
        assert_eq!(stored.version, continues + 1);
    }
    a.delete(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_pages_newest_first_by_tenant_and_owner() {
    let Some(url) = pg_support::server("pg") else {
        return;
    };
    let store = PostgresStore::connect(&url).unwrap();
    let tenant = unique("tenant");
    let mut ids = Vec::new();
    for i in 0..25 {
        let id = format!("{tenant}-s{i:02}");
        let owner = if i % 5 == 0 { "alice" } else { "bob" };
        store
            .commit(&commit(&id, &tenant, owner, 0, "{}"))
            .await
            .unwrap();
        ids.push(id);
    }
    // Touching the oldest makes it the newest (a millisecond on: the order's precision; within
    // one millisecond the order is by session id, descending, which is the creation order here).
    tokio::time::sleep(Duration::from_millis(3)).await;
    store
        .commit(&commit(&ids[0], &tenant, "alice", 1, "{}"))
        .await
        .unwrap();
    let mut expected: Vec<String> = ids[1..].iter().rev().cloned().collect();
    expected.insert(0, ids[0].clone());

    let mut seen = Vec::new();
    let mut query = ListQuery {
        tenant: Some(tenant.clone()),
        limit: 10,
        ..Default::default()
    };
    let mut pages = 0;
    loop {
        let page = store.list(&query).await.unwrap();
        pages += 1;
        assert!(page.sessions.len() <= 10);
        seen.extend(page.sessions.iter().map(|s| s.session_id.clone()));
        match page.next_cursor {
            Some(c) => query.cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, expected);

    let alice = store
        .list(&ListQuery {
            tenant: Some(tenant.clone()),
            owner: Some("alice".into()),
            limit: 100,
            cursor: None,
        })
        .await
        .unwrap();
    let alice: Vec<_> = alice
        .sessions
        .iter()
        .map(|s| (s.session_id.as_str(), s.version))
        .collect();
    assert_eq!(
        alice,
        [
            (ids[0].as_str(), 2),
            (ids[20].as_str(), 1),
            (ids[15].as_str(), 1),
            (ids[10].as_str(), 1),
            (ids[5].as_str(), 1)
        ]
    );
    let bad = ListQuery {
        cursor: Some("yesterday".into()),
        limit: 5,
        ..Default::default()
    };
    assert!(matches!(
        store.list(&bad).await,
        Err(StoreError::Invalid(_))
    ));
    for id in &ids {
        store.delete(id).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_goes_away_is_unavailable_then_works_again() {
    // Its own server: stopping the shared one would fail the tests running beside this one.
    let dir = "pg-restart";
    let Some(url) = pg_support::server(dir) else {
        return;
    };
    let store = PostgresStore::connect(&url)
        .unwrap()
        .with_timeout(Duration::from_secs(5));
    let id = unique("gone");
    assert_eq!(
        store
            .commit(&commit(&id, "t", "o", 0, "one"))
            .await
            .unwrap(),
        1
    );
    pg_support::stop(dir);
    let err = store
        .commit(&commit(&id, "t", "o", 1, "two"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    let err = store.load(&id).await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    assert!(pg_support::server(dir).is_some());
    // Reconnected; the commit that failed landed nowhere, so version 1 is still the one to continue.
    assert_eq!(store.load(&id).await.unwrap().unwrap().document, "one");
    assert_eq!(
        store
            .commit(&commit(&id, "t", "o", 1, "two"))
            .await
            .unwrap(),
        2
    );
    store.delete(&id).await.unwrap();
    // Its own server: nobody else needs it running.
    tokio::task::spawn_blocking(move || pg_support::stop(dir))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_database_is_unavailable_not_a_hang() {
    // A port nothing listens on (the discard port needs root to bind).
    let store = PostgresStore::connect("postgres://agentao@127.0.0.1:9/agentao")
        .unwrap()
        .with_timeout(Duration::from_secs(3));
    let t = std::time::Instant::now();
    let err = store.load("x").await.unwrap_err();
    assert!(
        matches!(err, StoreError::Unavailable(_) | StoreError::Timeout { .. }),
        "{err:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_never_answers_is_a_timeout() {
    // Accepts the connection, then says nothing: a hung server, not a refused port.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = tokio::spawn(async move {
        let mut sockets = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            sockets.push(s);
        }
    });
    let store = PostgresStore::connect(&format!("postgres://agentao@127.0.0.1:{port}/agentao"))
        .unwrap()
        .with_timeout(Duration::from_millis(500));
    let t = std::time::Instant::now();
    let c = commit("hung", "t", "o", 0, "{}");
    let err = store.commit(&c).await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Timeout {
                operation: "commit"
            } | StoreError::Unavailable(_)
        ),
        "{err:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    held.abort();
}

/// Not a pass/fail bound (the machine is shared): prints what a commit costs with four
/// committers on four connections, for docs/scale-out.md, and checks every commit landed once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_latency_with_four_committers() {
    let Some(url) = pg_support::server("pg") else {
        return;
    };
    let run = unique("lat");
    let mut tasks = Vec::new();
    for w in 0..4 {
        let store = PostgresStore::connect(&url).unwrap();
        let run = run.clone();
        tasks.push(tokio::spawn(async move {
            let doc = "x".repeat(8 * 1024);
            let mut times = Vec::new();
            for s in 0..10 {
                let id = format!("{run}-{w}-{s}");
                for v in 0..10u64 {
                    let t = std::time::Instant::now();
                    let c = commit(&id, "lat", "o", v, &doc);
                    assert_eq!(store.commit(&c).await.unwrap(), v + 1);
                    times.push(t.elapsed());
                }
                store.delete(&id).await.unwrap();
            }
            times
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort();
    assert_eq!(all.len(), 400);
    let pct = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)];
    eprintln!(
        "PostgreSQL commit latency, 4 committers, 8 KiB documents: p50 {:?}, p99 {:?}, max {:?}",
        pct(0.5),
        pct(0.99),
        all[all.len() - 1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_stopped_mid_commit_loses_no_acknowledged_commit() {
    let dir = "pg-midcommit";
    let Some(url) = pg_support::server(dir) else {
        return;
    };
    let store = Arc::new(
        PostgresStore::connect(&url)
            .unwrap()
            .with_timeout(Duration::from_secs(5)),
    );
    let id = unique("mid");
    let committer = {
        let (store, id) = (store.clone(), id.clone());
        tokio::spawn(async move {
            // Commits as fast as they go until the database is gone; the in-memory version
            // moves only on an acknowledged commit, as the agent's does.
            let (mut version, mut failures) = (0u64, Vec::new());
            let doc = "y".repeat(64 * 1024);
            while failures.len() < 3 {
                match store.commit(&commit(&id, "t", "o", version, &doc)).await {
                    Ok(v) => version = v,
                    Err(e) => failures.push(e),
                }
            }
            (version, failures)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    tokio::task::spawn_blocking(move || pg_support::stop(dir))
        .await
        .unwrap();
    let (acknowledged, failures) = committer.await.unwrap();
    assert!(acknowledged > 0, "no commit landed before the stop");
    for e in &failures {
        assert!(
            matches!(e, StoreError::Unavailable(_) | StoreError::Timeout { .. }),
            "{e:?}"
        );
    }
    assert!(pg_support::server(dir).is_some());
    // Every acknowledged commit is there; at most the one in flight landed unacknowledged.
    let stored = store.load(&id).await.unwrap().unwrap().version;
    assert!(
        stored == acknowledged || stored == acknowledged + 1,
        "acknowledged {acknowledged}, stored {stored}"
    );
    // The session goes on from what the store says.
    assert_eq!(
        store
            .commit(&commit(&id, "t", "o", stored, "{}"))
            .await
            .unwrap(),
        stored + 1
    );
    store.delete(&id).await.unwrap();
    // Its own server: nobody else needs it running.
    tokio::task::spawn_blocking(move || pg_support::stop(dir))
        .await
        .unwrap();
}
