(ns stutter.wire
  "stutter's client protocol: one request line, one reply line.

    get k           -> the value, or an empty line if absent
    put k v         -> ok
    del k           -> ok
    cas k from to   -> ok | fail <current or ->     (from `-` = absent)
    status          -> one JSON line
    not the leader  -> leader is <addr> | retry
    busy            -> retry
    bad input       -> error ...

  Keys and values are single space-free tokens. This namespace is pure
  Clojure plus java.net, no Jepsen, so that its unit tests
  (test/stutter/wire_test.clj) load in a second."
  (:require [clojure.string :as str])
  (:import (java.io BufferedReader InputStreamReader OutputStreamWriter
                    BufferedWriter)
           (java.net InetSocketAddress Socket SocketTimeoutException)
           (java.nio.charset StandardCharsets)))

;; ---------------------------------------------------------------- encoding

(defn- token
  "Renders a key or value as a protocol token; rejects anything that would
  break the line framing."
  [x]
  (let [s (if (keyword? x) (name x) (str x))]
    (when (or (str/blank? s) (re-find #"\s" s))
      (throw (IllegalArgumentException.
               (str "not a single space-free token: " (pr-str x)))))
    s))

(defn encode
  "Encodes a request as one line, newline included. Requests are vectors:
  [:get k] [:put k v] [:del k] [:cas k from to] [:status]; a nil `from`
  means absent (`-`)."
  [[f & args :as req]]
  (str (case f
         :get    (let [[k] args] (str "get " (token k)))
         :put    (let [[k v] args] (str "put " (token k) " " (token v)))
         :del    (let [[k] args] (str "del " (token k)))
         :cas    (let [[k from to] args]
                   (str "cas " (token k) " "
                        (if (nil? from) "-" (token from)) " " (token to)))
         :status "status"
         (throw (IllegalArgumentException. (str "unknown request " (pr-str req)))))
       "\n"))

;; ---------------------------------------------------------------- decoding

(declare parse-status)

(defn- rejection
  "Replies that mean the same for every request: redirects, busy, errors.
  Returns nil for anything else."
  [line]
  (cond
    (str/starts-with? line "leader is ")
    {:type :fail, :error [:not-leader (subs line (count "leader is "))]}

    (= line "retry")
    {:type :fail, :error :retry}

    (str/starts-with? line "error")
    ; A bad command was not executed, but e.g. "error stale request" is
    ; not a promise that nothing happened: indefinite, to be safe.
    {:type :info, :error [:server-error (str/trim (subs line 5))]}))

(defn decode
  "Decodes the reply line (without its newline) to the request `req`.
  Returns a map:

    {:type :ok,   :value v}          success; v is the read value (nil if
                                     absent) for :get, the parsed map for
                                     :status, nil otherwise
    {:type :fail, :error e}          definitely not executed: e is
                                     [:not-leader addr], :retry, or
                                     [:cas-mismatch current]
    {:type :info, :error e}          outcome unknown (server error, or a
                                     reply we do not understand)

  A get whose value is literally `retry`, `ok`, `leader is ...` or starts
  with `error` is ambiguous in this protocol; the Jepsen workload only
  writes integers."
  [[f :as req] ^String line]
  (let [line (str/replace line #"\r$" "")]
    (or (when-not (and (= f :get) (= line "")) (rejection line))
        (case f
          :get    {:type :ok, :value (when-not (= line "") line)}
          (:put :del)
          (if (= line "ok")
            {:type :ok, :value nil}
            {:type :info, :error [:unexpected line]})
          :cas    (cond
                    (= line "ok")
                    {:type :ok, :value nil}

                    (str/starts-with? line "fail ")
                    (let [cur (subs line 5)]
                      {:type :fail
                       :error [:cas-mismatch (when-not (= cur "-") cur)]})

                    :else {:type :info, :error [:unexpected line]})
          :status (if (str/starts-with? line "{")
                    {:type :ok, :value (parse-status line)}
                    {:type :info, :error [:unexpected line]})))))

;; A tiny JSON reader for the status line: a flat object of numbers,
;; strings, null and booleans (no nested structures are produced by
;; replica's status). Keys become keywords.

(defn parse-status
  "Parses a flat JSON object such as
  {\"id\":0,\"role\":\"Leader\",\"leader\":0,\"last_executed\":12}."
  [^String s]
  (let [s (str/trim s)]
    (when-not (and (str/starts-with? s "{") (str/ends-with? s "}"))
      (throw (IllegalArgumentException. (str "not a JSON object: " s))))
    (->> (re-seq #"\"([^\"]+)\"\s*:\s*(\"(?:[^\"\\]|\\.)*\"|-?[0-9][0-9.eE+-]*|null|true|false|\{[^}]*\}|\[[^\]]*\])"
                 s)
         (map (fn [[_ k v]]
                [(keyword k)
                 (cond
                   (= v "null")               nil
                   (= v "true")               true
                   (= v "false")              false
                   (str/starts-with? v "\"")  (subs v 1 (dec (count v)))
                   (re-matches #"-?[0-9]+" v) (bigint v)
                   (re-matches #"-?[0-9].*" v) (Double/parseDouble v)
                   :else                      v)]))
         (into {}))))

;; ---------------------------------------------------------------- sockets

(defn parse-addr
  "\"host:port\" -> [host port]."
  [^String addr]
  (let [i (.lastIndexOf addr ":")]
    (when (neg? i)
      (throw (IllegalArgumentException. (str "no port in address " addr))))
    [(subs addr 0 i) (Long/parseLong (subs addr (inc i)))]))

(defn connect
  "Opens a connection to host:port, waiting at most timeout-ms to connect.
  Every later read on it also times out after timeout-ms."
  [host port timeout-ms]
  (let [sock (Socket.)]
    (try
      (.setTcpNoDelay sock true)
      (.connect sock (InetSocketAddress. ^String host (int port)) (int timeout-ms))
      (.setSoTimeout sock (int timeout-ms))
      {:socket sock
       :addr   (str host ":" port)
       :in     (BufferedReader.
                 (InputStreamReader. (.getInputStream sock) StandardCharsets/UTF_8))
       :out    (BufferedWriter.
                 (OutputStreamWriter. (.getOutputStream sock) StandardCharsets/UTF_8))}
      (catch Throwable t
        (.close sock)
        (throw t)))))

(defn close!
  [conn]
  (when conn
    (try (.close ^Socket (:socket conn)) (catch Throwable _ nil)))
  nil)

(defn call-line
  "Sends one request line (newline included) and reads one reply line.
  Throws SocketTimeoutException after the connection's timeout, and
  java.io.EOFException if the server closed the connection. After any
  exception the connection is out of step and must be closed."
  [conn ^String line]
  (let [^BufferedWriter out (:out conn)
        ^BufferedReader in  (:in conn)]
    (.write out line)
    (.flush out)
    (or (.readLine in)
        (throw (java.io.EOFException. (str "connection closed by " (:addr conn)))))))

(defn call
  "Encodes req, sends it on conn, and decodes the reply (see decode)."
  [conn req]
  (decode req (call-line conn (encode req))))

(defn call-once
  "Connects to addr (\"host:port\"), performs one request, closes (the
  db's status queries)."
  ([addr req] (call-once addr req 2000))
  ([addr req timeout-ms]
   (let [[host port] (parse-addr addr)
         conn        (connect host port timeout-ms)]
     (try (call conn req)
          (finally (close! conn))))))

(defn timeout?
  "Is this exception a read/connect timeout?"
  [e]
  (instance? SocketTimeoutException e))
