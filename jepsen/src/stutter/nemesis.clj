(ns stutter.nemesis
  "Faults, on top of jepsen.nemesis.combined:

    partition  network partitions: a clean majority/minority split, the
               current leader(s) isolated (asked over `status`), a bridge
               (two halves joined by one node that sees both), and
               overlapping majorities in a ring
    kill       kill -9 one node, a majority, or the leader; restart later
    pause      SIGSTOP / SIGCONT (Jepsen's hammer time): the process freezes
               with all its threads, like a stop-the-world GC pause, while
               the kernel keeps accepting its TCP
    clock      (optional) clock bumps and strobes on the nodes; needs a
               compiler on the nodes and root; not in `all`

  `--nemesis` takes a comma-separated list of these, `all` (partition,
  kill, pause) or `none`."
  (:require [clojure.string :as str]
            [jepsen.nemesis :as n]
            [jepsen.nemesis.combined :as nc]))

(def all-faults #{:partition :kill :pause})
(def known-faults #{:partition :kill :pause :clock})

(defn parse-faults
  "\"partition,pause\" -> #{:partition :pause}; \"all\" and \"none\" too."
  [s]
  (->> (str/split (str s) #"[,\s]+")
       (remove str/blank?)
       (mapcat (fn [f]
                 (case f
                   "all"  all-faults
                   "none" []
                   (let [k (keyword f)]
                     (when-not (known-faults k)
                       (throw (IllegalArgumentException.
                                (str "unknown nemesis " f "; expected one of "
                                     (str/join ", " (map name (sort known-faults)))
                                     ", all, none"))))
                     [k]))))
       set))

(defn bridge-grudge
  "Jepsen's bridge: two halves that cannot see each other, and one node in
  the middle that sees both (for 3 nodes: n1 | n2 | n3 with n2 seeing
  both)."
  [nodes]
  (n/bridge (vec nodes)))

(defn package
  "A combined nemesis package. opts: :db, :nodes, :faults (a set),
  :interval (seconds between faults).

  Only the packages for the requested faults are built: composing all of
  jepsen.nemesis.combined's packages (nemesis-package) would also set up the
  file-corruption and clock nemeses on every node, which download and
  compile tools there even when those faults are never used."
  [{:keys [nodes faults] :as opts}]
  (let [opts (merge opts
                    {:faults    faults
                     :partition {:targets [:majority
                                           :primaries           ; leader isolation
                                           (bridge-grudge nodes)
                                           :majorities-ring]}
                     :kill      {:targets [:one :primaries :majority]}
                     :pause     {:targets [:one :primaries :majority]}})]
    (nc/compose-packages
      (cond-> []
        (faults :partition)                     (conj (nc/partition-package opts))
        (some faults [:kill :pause])            (conj (nc/db-package opts))
        (faults :clock)                         (conj (nc/clock-package opts))))))
