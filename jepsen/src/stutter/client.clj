(ns stutter.client
  "A Jepsen client for stutter's text protocol. Each Jepsen process gets a
  client bound to one node (processes are spread over the nodes round-robin),
  so reads and writes go to every node, leaders and followers alike; a
  follower answers `leader is <addr>`, which is a definite :fail.

  Outcomes:
    ok / value                     -> :ok
    leader is .. / retry / cas fail -> :fail (definitely not executed)
    timeout, broken connection,
    server error, garbage          -> :info (may or may not have happened)
    connection refused             -> :fail (nothing was sent)

  Values are integers (the cas-register workload writes small integers);
  keys are `k<n>` for jepsen.independent's key n."
  (:require [clojure.tools.logging :refer [info warn]]
            [jepsen [client :as client]
                    [independent :as independent]]
            [slingshot.slingshot :refer [try+]]
            [stutter.db :as sdb]
            [stutter.wire :as wire])
  (:import (java.net ConnectException SocketTimeoutException)))

(defn key-token [k] (str "k" k))

(defn parse-value
  [v]
  (when v (Long/parseLong v)))

(defn op->request
  "The wire request for an independent op: [:get k], [:put k v], [:cas k from to]."
  [op]
  (let [[k v] (:value op)
        kt    (key-token k)]
    (case (:f op)
      :read  [:get kt]
      :write [:put kt v]
      :cas   (let [[from to] v] [:cas kt from to]))))

(defn apply-reply
  "Completes an invocation with a decoded reply."
  [op reply]
  (let [[k v] (:value op)]
    (case (:type reply)
      :ok   (case (:f op)
              :read (assoc op :type :ok
                           :value (independent/tuple k (parse-value (:value reply))))
              (assoc op :type :ok))
      :fail (assoc op :type :fail, :error (:error reply))
      :info (assoc op :type :info, :error (:error reply)))))

(defn- conn!
  "The client's connection, opened on demand."
  [{:keys [conn test node timeout]}]
  (or @conn
      (let [[host port] (wire/parse-addr (sdb/client-addr test node))]
        (reset! conn (wire/connect host port timeout)))))

(defn- drop-conn!
  [{:keys [conn]}]
  (wire/close! @conn)
  (reset! conn nil))

(defrecord Client [test node conn timeout]
  client/Client
  (open! [this test node]
    (assoc this
           :test    test
           :node    node
           :conn    (atom nil)
           :timeout (:client-timeout test 1000)))

  (setup! [this test])

  (invoke! [this test op]
    (let [req (op->request op)]
      (try
        (let [c (try (conn! this)
                     (catch ConnectException e
                       ; Nothing sent: a definite failure.
                       (throw (ex-info "refused" {::refused e}))))]
          (apply-reply op (wire/call c req)))
        (catch clojure.lang.ExceptionInfo e
          (drop-conn! this)
          (if (::refused (ex-data e))
            (assoc op :type :fail, :error :connection-refused)
            (throw e)))
        (catch SocketTimeoutException e
          ; The request may still commit: indefinite. The connection is
          ; now out of step with its replies, so drop it.
          (drop-conn! this)
          (assoc op :type :info, :error :timeout))
        (catch java.io.IOException e
          (drop-conn! this)
          (assoc op :type :info, :error [:io (.getMessage e)])))))

  (teardown! [this test])

  (close! [this test]
    (when conn (drop-conn! this))))

(defn client
  []
  (map->Client {}))
