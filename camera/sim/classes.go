package sim

// Outdoor semantic ids follow Cityscapes (labelIds).
const (
	ClassUnlabeled   uint8 = 0
	ClassStatic      uint8 = 4 // unlabeled static objects: the obstacles of Config.Obstacles
	ClassRoad        uint8 = 7
	ClassSidewalk    uint8 = 8
	ClassBuilding    uint8 = 11
	ClassWall        uint8 = 12
	ClassFence       uint8 = 13
	ClassPole        uint8 = 17
	ClassTrafficSign uint8 = 20
	ClassVegetation  uint8 = 21
	ClassTerrain     uint8 = 22
	ClassSky         uint8 = 23
	ClassPerson      uint8 = 24
	ClassCar         uint8 = 26
)

// Indoor semantic ids follow the NYU-Depth-v2 40-class set. The indoor world
// never emits 23 (NYU "books"), so id 23 means sky in every data set this
// package writes.
const (
	ClassNYUWall       uint8 = 1
	ClassNYUFloor      uint8 = 2
	ClassNYUCabinet    uint8 = 3
	ClassNYUBed        uint8 = 4
	ClassNYUChair      uint8 = 5
	ClassNYUSofa       uint8 = 6
	ClassNYUTable      uint8 = 7
	ClassNYUDoor       uint8 = 8
	ClassNYUWindow     uint8 = 9
	ClassNYUBookshelf  uint8 = 10
	ClassNYUPicture    uint8 = 11
	ClassNYUFloorMat   uint8 = 20
	ClassNYUCeiling    uint8 = 22
	ClassNYUTelevision uint8 = 25
	ClassNYULamp       uint8 = 35
	ClassNYUOtherProp  uint8 = 40
)

// ClassColor returns a display colour for a semantic id (Cityscapes palette
// for outdoor ids; indoor ids get distinct colours from a fixed table).
func ClassColor(world string, id uint8) (r, g, b uint8) {
	if world == WorldIndoor {
		c := nyuPalette[id%uint8(len(nyuPalette))]
		return c[0], c[1], c[2]
	}
	switch id {
	case ClassStatic:
		return 111, 74, 0
	case ClassRoad:
		return 128, 64, 128
	case ClassSidewalk:
		return 244, 35, 232
	case ClassBuilding:
		return 70, 70, 70
	case ClassWall:
		return 102, 102, 156
	case ClassFence:
		return 190, 153, 153
	case ClassPole:
		return 153, 153, 153
	case ClassTrafficSign:
		return 220, 220, 0
	case ClassVegetation:
		return 107, 142, 35
	case ClassTerrain:
		return 152, 251, 152
	case ClassSky:
		return 70, 130, 180
	case ClassPerson:
		return 220, 20, 60
	case ClassCar:
		return 0, 0, 142
	}
	return 0, 0, 0
}

var nyuPalette = [41][3]uint8{
	{0, 0, 0}, {174, 199, 232}, {152, 223, 138}, {31, 119, 180}, {255, 187, 120}, {188, 189, 34},
	{140, 86, 75}, {255, 152, 150}, {214, 39, 40}, {197, 176, 213}, {148, 103, 189},
	{196, 156, 148}, {23, 190, 207}, {178, 76, 76}, {247, 182, 210}, {66, 188, 102},
	{219, 219, 141}, {140, 57, 197}, {202, 185, 52}, {51, 176, 203}, {200, 54, 131},
	{92, 193, 61}, {78, 71, 183}, {172, 114, 82}, {255, 127, 14}, {91, 163, 138},
	{153, 98, 156}, {140, 153, 101}, {158, 218, 229}, {100, 125, 154}, {178, 127, 135},
	{120, 185, 128}, {146, 111, 194}, {44, 160, 44}, {112, 128, 144}, {96, 207, 209},
	{227, 119, 194}, {213, 92, 176}, {94, 106, 211}, {82, 84, 163}, {100, 85, 144},
}
