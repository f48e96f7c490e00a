(defproject stutter-jepsen "0.1.0-SNAPSHOT"
  :description "Jepsen test for stutter, a MultiPaxos replicated KV store,
               under partitions, crashes and stop-the-world (GC-like) pauses."
  :license {:name "Eclipse Public License"
            :url  "http://www.eclipse.org/legal/epl-v10.html"}
  :dependencies [[org.clojure/clojure "1.12.5"]
                 ; Knossos and Elle come with Jepsen.
                 [jepsen "0.3.13"]
                 ; Reads the campaigns' verdict.json (stutter.recheck).
                 [org.clojure/data.json "2.5.1"]]
  :source-paths ["jepsen/src"]
  :test-paths ["jepsen/test"]
  :resource-paths ["jepsen/resources"]
  :target-path "target/lein/%s"
  :main stutter.core
  :jvm-opts ["-Xmx4g"
             "-Djava.awt.headless=true"
             "-server"]
  ; For machines that cannot reach Clojars: the Clojars-only artifacts
  ; (Jepsen, Knossos, Elle and their kin) from a local Maven repository
  ; folder named by STUTTER_JEPSEN_REPO, everything else from Maven
  ; Central, and Clojars never asked (each miss would wait on it).
  ; jepsen/lein selects this profile when such a folder exists; without it
  ; this file is the ordinary internet path through Clojars.
  :profiles {:no-clojars
             {:repositories ^:replace
              [["stutter-jepsen-repo"
                {:url ~(str "file://" (or (System/getenv "STUTTER_JEPSEN_REPO")
                                          "/STUTTER_JEPSEN_REPO-is-not-set"))}]
               ["central" {:url "https://repo1.maven.org/maven2/"
                           :snapshots false}]]}})
