(ns stutter.client
  "A Jepsen client for stutter's text protocol. Each Jepsen process gets a
  client bound to one node (processes are spread over the nodes round-robin),
  so requests go to every node, leaders and followers alike. A follower
  answers `leader is <addr>`: nothing was executed, so the client sends the
  same request once to that address, as a real client would, and that
  reply decides the op (a second redirect is a definite :fail). Without
  this, the processes of followers would see nothing but redirects and,
  as Jepsen hands the next op to whichever process is free, a run with a
  follower's process first in line completed one op in ten.

  Outcomes:
    ok / value                     -> :ok
    leader is .. / retry / cas fail -> :fail (definitely not executed)
    timeout, broken connection,
    server error, garbage          -> :info (may or may not have happened)
    connection refused or not made
    within the timeout             -> :fail (nothing was sent)

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

(defn- open!
  "The connection in atom a if it goes to addr, else a new one to addr
  (and the old one closed). A connection that could not be made (refused,
  or no answer within the timeout) throws ex-info ::unconnected: nothing
  was sent."
  [a addr timeout]
  (let [c @a]
    (if (and c (= addr (:addr c)))
      c
      (let [[host port] (wire/parse-addr addr)]
        (wire/close! c)
        (reset! a nil)
        (try (reset! a (wire/connect host port timeout))
             (catch java.io.IOException e
               (throw (ex-info "not connected"
                               {::unconnected (if (instance? ConnectException e)
                                                :connection-refused
                                                [:not-connected (.getMessage e)])}
                               e))))))))

(defn- drop-conns!
  [{:keys [conn leader-conn]}]
  (doseq [a [conn leader-conn] :when a]
    (wire/close! @a)
    (reset! a nil)))

(defn- call!
  "The decoded reply to req from the client's node, or, if that node
  redirects, from the leader it names."
  [{:keys [conn leader-conn test node timeout]} req]
  (let [r (wire/call (open! conn (sdb/client-addr test node) timeout) req)
        e (:error r)]
    (if (and (= :fail (:type r)) (vector? e) (= :not-leader (first e)) (second e))
      (assoc (wire/call (open! leader-conn (second e) timeout) req)
             :redirected-to (second e))
      r)))

(defrecord Client [test node conn leader-conn timeout]
  client/Client
  (open! [this test node]
    (assoc this
           :test        test
           :node        node
           :conn        (atom nil)
           :leader-conn (atom nil)
           :timeout     (:client-timeout test 1000)))

  (setup! [this test])

  (invoke! [this test op]
    (let [req (op->request op)]
      (try
        (let [r (call! this req)]
          (cond-> (apply-reply op r)
            (:redirected-to r) (assoc :redirected-to (:redirected-to r))))
        (catch clojure.lang.ExceptionInfo e
          (drop-conns! this)
          (if-let [why (::unconnected (ex-data e))]
            ; Nothing sent: a definite failure.
            (assoc op :type :fail, :error why)
            (throw e)))
        (catch SocketTimeoutException e
          ; The request may still commit: indefinite. The connection is
          ; now out of step with its replies, so drop it.
          (drop-conns! this)
          (assoc op :type :info, :error :timeout))
        (catch java.io.IOException e
          (drop-conns! this)
          (assoc op :type :info, :error [:io (.getMessage e)])))))

  (teardown! [this test])

  (close! [this test]
    (when conn (drop-conns! this))))

(defn client
  []
  (map->Client {}))
