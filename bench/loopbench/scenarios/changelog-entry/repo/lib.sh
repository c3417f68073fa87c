greet() { echo "Hi $1"; }
