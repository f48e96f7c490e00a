module stutter/gc/calibrate

go 1.26
